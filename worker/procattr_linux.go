package worker

import "syscall"

// procAttr puts the command in its own process group (so a timeout can kill
// the whole group) and has the kernel kill it if hookwarden dies without a
// chance to clean up (kill -9). Grandchildren that left the group's leader
// are reaped by systemd's KillMode=control-group on restart.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

//go:build !linux

package worker

import "syscall"

// procAttr puts the command in its own process group, so a timeout can kill
// the whole group.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

package procfs

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// TestStatusAndCPUOfAChild reads a real child process: a busy loop shows
// CPU time, and its status has the fields the harnesses read.
func TestStatusAndCPUOfAChild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var cpu float64
	for deadline := time.Now().Add(5 * time.Second); cpu < 0.05 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		c, err := CPUSeconds(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		cpu = c
	}
	if cpu < 0.05 {
		t.Errorf("child CPU %.2f s after its busy loop, want some", cpu)
	}
	st, err := Status(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if st["Threads"] < 1 || st["VmRSS"] <= 0 || st["VmHWM"] < st["VmRSS"] {
		t.Errorf("status Threads=%d VmRSS=%d VmHWM=%d: want a live process's", st["Threads"], st["VmRSS"], st["VmHWM"])
	}
	if _, err := Status(1 << 30); !os.IsNotExist(err) {
		t.Errorf("Status of no process: %v, want not exist", err)
	}
}

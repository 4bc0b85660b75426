// Package benchcpu reports a benchmark's CPU time per iteration, for the
// benchmarks whose figures are compared as ratios on a shared machine.
package benchcpu

import (
	"syscall"
	"testing"
	"time"
)

// Report starts counting the process's CPU time (user and system, the GC's
// included); the function it returns reports it per iteration as
// cpu-ns/op. On a shared machine ns/op counts the time the benchmark waited
// for a core; CPU time does not, so it is the steadier figure for a ratio.
// Use: defer benchcpu.Report(b)().
func Report(b *testing.B) func() {
	start := cpuTime()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Package loopback hands out loopback addresses for child processes to bind,
// again after each restart.
//
// The usual trick, listen on port 0 and close, picks a port from the
// kernel's ephemeral range, the range every outgoing connection also draws
// its local port from. Under a test run's load one of those connections can
// hold the port by the time the child binds it ("address already in use").
// The ports handed out here lie below that range, where only an explicit
// bind takes a port, and one process never hands out the same port twice.
package loopback

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// floor is the lowest port handed out: above the registered services that
// a developer's machine commonly runs (PostgreSQL's 5432, 8080, 9090, …).
const floor = 20000

var (
	mu   sync.Mutex
	next int // the next port to try; 0 until the first call
	top  int // one past the last port below the ephemeral range
)

// Addr returns "127.0.0.1:port" for a port that is free now, lies below the
// kernel's ephemeral range and has not been handed out by this process
// before. Where that range leaves too little room below it, it falls back to
// a port the kernel picks.
func Addr() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if next == 0 {
		top = ephemeralLow(readRange())
		// Test binaries of several packages run at once: each starts at its
		// own place so that they rarely try the same ports.
		next = floor + os.Getpid()%max(1, top-floor)
	}
	span := top - floor
	if span < 1000 {
		return kernelPick()
	}
	for tried := 0; tried < span; tried++ {
		port := next
		next++
		if next >= top {
			next = floor
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // somebody else's
		}
		ln.Close()
		return ln.Addr().String(), nil
	}
	return "", fmt.Errorf("loopback: no free port in %d-%d", floor, top-1)
}

func kernelPick() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func readRange() string {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return ""
	}
	return string(b)
}

// ephemeralLow is the first port of the ephemeral range that
// ip_local_port_range describes ("32768\t60999\n"); Linux's default when the
// file cannot be read or parsed, as on other systems (whose ranges start
// higher still).
func ephemeralLow(s string) int {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo < 1 || lo > 65535 {
		return 32768
	}
	return lo
}

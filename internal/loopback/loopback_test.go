package loopback

import (
	"net"
	"strconv"
	"testing"
)

func TestAddrsLieBelowTheEphemeralRangeAndDoNotRepeat(t *testing.T) {
	low := ephemeralLow(readRange())
	if low-floor < 1000 {
		t.Skipf("this machine's ephemeral range starts at %d: Addr falls back to the kernel's pick", low)
	}
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		addr, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if port < floor || port >= low {
			t.Fatalf("%s: outside %d-%d", addr, floor, low-1)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s was handed out but cannot be bound: %v", addr, err)
		}
		ln.Close()
	}
}

func TestAddrSkipsATakenPort(t *testing.T) {
	if ephemeralLow(readRange())-floor < 1000 {
		t.Skip("Addr falls back to the kernel's pick here")
	}
	mu.Lock()
	if next == 0 {
		mu.Unlock()
		if _, err := Addr(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
	}
	want := next
	mu.Unlock()
	taken := net.JoinHostPort("127.0.0.1", strconv.Itoa(want))
	// Held by this test, or by somebody else already: either way not free.
	if held, err := net.Listen("tcp", taken); err == nil {
		defer held.Close()
	}
	addr, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	if addr == taken {
		t.Fatalf("Addr handed out %s, which is held", addr)
	}
}

func TestEphemeralLow(t *testing.T) {
	for in, want := range map[string]int{
		"32768\t60999\n": 32768,
		"49152 65535":    49152,
		"":               32768,
		"garbage":        32768,
		"0 10":           32768,
		"1024\t65535\n":  1024,
	} {
		if got := ephemeralLow(in); got != want {
			t.Errorf("ephemeralLow(%q) = %d, want %d", in, got, want)
		}
	}
}

package sdnotify

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// MustListen opens a unixgram socket standing in for systemd's.
func MustListen(tb testing.TB, path string) *net.UnixConn {
	tb.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

func read(tb testing.TB, conn *net.UnixConn) string {
	tb.Helper()
	buf := make([]byte, 4096)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := conn.Read(buf)
	if err != nil {
		tb.Fatal(err)
	}
	return string(buf[:n])
}

func TestNotifySendsOneDatagram(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"path", func(t *testing.T) string { return filepath.Join(t.TempDir(), "notify.sock") }},
		{"abstract", func(t *testing.T) string { return "@hookwarden-test-" + strconv.Itoa(os.Getpid()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path(t)
			conn := MustListen(t, path)
			t.Setenv("NOTIFY_SOCKET", path)
			n := FromEnv()
			if !n.Enabled() {
				t.Fatal("Enabled() = false with NOTIFY_SOCKET set")
			}
			if err := n.Notify(Ready, Status("serving\non :8080")); err != nil {
				t.Fatal(err)
			}
			if got, want := read(t, conn), "READY=1\nSTATUS=serving on :8080"; got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}

func TestDisabledNotifierDoesNothing(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	for _, n := range []*Notifier{nil, {}, FromEnv()} {
		if n.Enabled() {
			t.Fatal("Enabled() = true without a socket")
		}
		if err := n.Notify(Ready); err != nil {
			t.Fatalf("Notify on a disabled notifier: %v", err)
		}
	}
}

func TestNotifyErrorsWhenNobodyListens(t *testing.T) {
	n := New(filepath.Join(t.TempDir(), "gone.sock"))
	if err := n.Notify(Watchdog); err == nil {
		t.Fatal("Notify to a missing socket returned nil")
	}
}

func TestWatchdogInterval(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		usec, pid string
		want      time.Duration
		ok, err   bool
	}{
		{"", "", 0, false, false},
		{"30000000", "", 30 * time.Second, true, false},
		{"200000", self, 200 * time.Millisecond, true, false},
		{"200000", "1", 0, false, false}, // meant for another process
		{"0", "", 0, false, true},
		{"soon", "", 0, false, true},
		{"200000", "me", 0, false, true},
	} {
		t.Setenv("WATCHDOG_USEC", tc.usec)
		t.Setenv("WATCHDOG_PID", tc.pid)
		got, ok, err := WatchdogInterval()
		if got != tc.want || ok != tc.ok || (err != nil) != tc.err {
			t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: got %v %v %v, want %v %v err=%v",
				tc.usec, tc.pid, got, ok, err, tc.want, tc.ok, tc.err)
		}
	}
}

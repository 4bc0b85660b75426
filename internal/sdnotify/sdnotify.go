// Package sdnotify speaks systemd's service notification protocol
// (sd_notify(3)) without cgo: newline-separated KEY=VALUE states in one
// datagram to the unix socket named by $NOTIFY_SOCKET.
//
// Guarantees: a process not started by systemd (no $NOTIFY_SOCKET) gets a
// Notifier whose methods do nothing and return nil, so callers never branch
// on "am I under systemd"; each Notify is one datagram, so systemd sees its
// states together or not at all; nothing here blocks for long (a datagram
// to a local socket, with a write deadline).
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The states a service sends (sd_notify(3)).
const (
	// Ready: start-up finished; for Type=notify this ends "activating".
	Ready = "READY=1"
	// Stopping: the service is shutting down; systemd stops the watchdog.
	Stopping = "STOPPING=1"
	// Reloading: a configuration reload began; send Ready when it is done.
	Reloading = "RELOADING=1"
	// Watchdog: the keep-alive ping for WatchdogSec=.
	Watchdog = "WATCHDOG=1"
)

// Status is the free-form line `systemctl status` shows.
func Status(s string) string {
	// A newline would end the state early and start a bogus one.
	return "STATUS=" + strings.ReplaceAll(s, "\n", " ")
}

// writeTimeout bounds one datagram; a healthy systemd reads at once.
const writeTimeout = 2 * time.Second

// Notifier sends states to systemd. The zero value and nil are valid and
// send nothing.
type Notifier struct {
	addr *net.UnixAddr
}

// FromEnv returns a Notifier for $NOTIFY_SOCKET. Without it (not under
// systemd, or Type= is not notify) the Notifier does nothing.
func FromEnv() *Notifier {
	return New(os.Getenv("NOTIFY_SOCKET"))
}

// New returns a Notifier for the socket at path. A leading "@" names an
// abstract socket (Go maps it to the leading NUL byte). An empty path gives
// a Notifier that does nothing.
func New(path string) *Notifier {
	if path == "" {
		return &Notifier{}
	}
	return &Notifier{addr: &net.UnixAddr{Name: path, Net: "unixgram"}}
}

// Enabled reports whether states are sent anywhere.
func (n *Notifier) Enabled() bool { return n != nil && n.addr != nil }

// Notify sends the states as one datagram. It returns nil when the Notifier
// is disabled.
func (n *Notifier) Notify(states ...string) error {
	if !n.Enabled() || len(states) == 0 {
		return nil
	}
	if strings.HasPrefix(n.addr.Name, "vsock:") {
		return errors.New("sdnotify: vsock notify sockets are not supported")
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sdnotify: dial %s: %w", n.addr.Name, err)
	}
	defer conn.Close()
	_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := conn.Write([]byte(strings.Join(states, "\n"))); err != nil {
		return fmt.Errorf("sdnotify: send: %w", err)
	}
	return nil
}

// WatchdogInterval returns $WATCHDOG_USEC, the time after which systemd
// considers the service hung without a Watchdog ping; ok is false when the
// watchdog is off, or meant for another process ($WATCHDOG_PID). Ping at
// half of it, as sd_watchdog_enabled(3) advises.
func WatchdogInterval() (d time.Duration, ok bool, err error) {
	s := os.Getenv("WATCHDOG_USEC")
	if s == "" {
		return 0, false, nil
	}
	us, err := strconv.ParseUint(s, 10, 63)
	if err != nil || us == 0 {
		return 0, false, fmt.Errorf("sdnotify: WATCHDOG_USEC=%q is not a positive number of microseconds", s)
	}
	if p := os.Getenv("WATCHDOG_PID"); p != "" {
		pid, err := strconv.Atoi(p)
		if err != nil {
			return 0, false, fmt.Errorf("sdnotify: WATCHDOG_PID=%q is not a process id", p)
		}
		if pid != os.Getpid() {
			return 0, false, nil
		}
	}
	return time.Duration(us) * time.Microsecond, true, nil
}

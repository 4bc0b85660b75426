package main

// Listeners: bound by serve itself, or passed by systemd's socket activation
// (systemd/hookwarden.socket; sd_listen_fds(3)). With passed sockets a
// restart refuses nothing: systemd keeps the listening sockets open while no
// process runs, the kernel queues new connections in their backlog, and the
// next serve accepts them. So a stopping serve never answers 503 for a
// restart; it hands over instead (handOver):
//
//  1. it stops accepting: it closes its own copies of the sockets (systemd
//     holds the originals, so the backlog stays and fills for the next
//     process);
//  2. for up to restartGrace it keeps answering requests on the connections
//     it has, normally (verified, committed, 200), each answer with
//     `Connection: close`, so that a client that sends on a kept-alive
//     connection gets its answer and then opens a new connection, which
//     waits in the backlog; the grace ends early once no connection is open;
//  3. then every read on what is still open fails at once: an idle
//     connection closes, a body still being read is refused (400, never a
//     2xx for half a body), and the requests already read finish (commit and
//     answer) in http.Server.Shutdown;
//  4. deliveries are handed back and the database closed, as without
//     activation.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// restartGrace is how long a stopping serve with passed sockets keeps
// answering on its open connections. A client that sends within it is
// answered (with Connection: close); one whose kept-alive connection stays
// idle through it finds the connection closed and connects again, into the
// backlog. It is short because new connections wait in the backlog meanwhile.
const restartGrace = 2 * time.Second

// listenFdsStart is the first passed descriptor (SD_LISTEN_FDS_START).
const listenFdsStart = 3

// Names of the passed sockets (FileDescriptorName= in the socket unit).
const (
	fdReceiver = "receiver"
	fdAdmin    = "admin"
)

// passedSockets are the listeners systemd passed, by name.
type passedSockets map[string]net.Listener

// takePassedSockets reads systemd's LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES
// and unsets them, whatever they hold, so that no child (a command
// destination) inherits them; the descriptors are marked close-on-exec for
// the same reason. Variables meant for another process (LISTEN_PID is not
// ours) pass nothing and return a note to log. A socket that is not a
// listening stream socket, an unnamed or unknown name, or a name given twice
// is a configuration error of the unit.
func takePassedSockets() (passedSockets, string, error) {
	pidS, fdsS, namesS := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS"), os.Getenv("LISTEN_FDNAMES")
	for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		_ = os.Unsetenv(k)
	}
	if fdsS == "" {
		return nil, "", nil
	}
	if pid, err := strconv.Atoi(pidS); err != nil || pid != os.Getpid() {
		return nil, fmt.Sprintf("LISTEN_FDS ignored: LISTEN_PID=%q is not this process (%d)", pidS, os.Getpid()), nil
	}
	n, err := strconv.Atoi(fdsS)
	if err != nil || n < 0 {
		return nil, "", fmt.Errorf("socket activation: LISTEN_FDS=%q is not a count", fdsS)
	}
	var names []string
	if namesS != "" {
		names = strings.Split(namesS, ":")
	}
	out := passedSockets{}
	fail := func(err error) (passedSockets, string, error) {
		for _, ln := range out {
			ln.Close()
		}
		return nil, "", fmt.Errorf("socket activation: %w", err)
	}
	for i := range n {
		fd := listenFdsStart + i
		syscall.CloseOnExec(fd)
		name := ""
		if i < len(names) {
			name = names[i]
		}
		f := os.NewFile(uintptr(fd), name)
		// FileListener works on a duplicate; the original closes here. Our
		// copy closing later is harmless: systemd holds its own.
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return fail(fmt.Errorf("descriptor %d (%q) is not a listening socket: %w", fd, name, err))
		}
		if name != fdReceiver && name != fdAdmin {
			ln.Close()
			return fail(fmt.Errorf("descriptor %d is named %q; name the sockets with FileDescriptorName=%s and FileDescriptorName=%s",
				fd, name, fdReceiver, fdAdmin))
		}
		if _, dup := out[name]; dup {
			ln.Close()
			return fail(fmt.Errorf("two descriptors are named %q", name))
		}
		out[name] = ln
	}
	return out, "", nil
}

// UsePassedSockets makes Open serve on the sockets systemd passed (those
// missing are bound from the configuration).
func (a *App) UsePassedSockets(p passedSockets) { a.passed = p }

// listen binds both listeners, or takes the passed ones. A passed socket
// takes precedence over listen and admin.listen; a different address is
// logged, as `check` cannot see the sockets.
func (a *App) listen() error {
	hook := a.passed[fdReceiver]
	if hook != nil {
		a.warnAddr("listen", a.cfg.Listen, hook.Addr())
		hc := &handoverListener{Listener: hook, conns: map[*handoverConn]struct{}{}}
		a.hookHandover = hc
		hook = hc
	}
	if len(a.passed) > 0 {
		names := make([]string, 0, len(a.passed))
		for _, n := range []string{fdReceiver, fdAdmin} {
			if a.passed[n] != nil {
				names = append(names, n)
			}
		}
		a.log.Info("socket activation: serving on the sockets systemd passed", "sockets", strings.Join(names, ","))
	}
	var err error
	if a.hookLn, a.certs, err = listenReceiver(a.cfg, hook); err != nil {
		return err
	}
	if ln := a.passed[fdAdmin]; ln != nil {
		a.warnAddr("admin.listen", a.cfg.Admin.Listen, ln.Addr())
		a.adminLn, a.adminPassed = ln, true
	} else if a.adminLn, err = net.Listen("tcp", a.cfg.Admin.Listen); err != nil {
		return fmt.Errorf("admin listen: %w", err)
	}
	return nil
}

// warnAddr logs a passed socket whose address is not the configured one.
func (a *App) warnAddr(key, configured string, got net.Addr) {
	if sameAddr(configured, got) {
		return
	}
	a.log.Warn("socket activation: the socket systemd passed is used, not the configured address",
		"key", key, "configured", configured, "passed", got.String())
}

// sameAddr compares a configured host:port with a bound address; the
// unspecified addresses (0.0.0.0, ::, "") count as one.
func sameAddr(configured string, got net.Addr) bool {
	tcp, ok := got.(*net.TCPAddr)
	if !ok {
		return false
	}
	want, err := net.ResolveTCPAddr("tcp", configured)
	if err != nil || want.Port != tcp.Port {
		return false
	}
	if want.IP == nil || want.IP.IsUnspecified() {
		return tcp.IP.IsUnspecified()
	}
	return want.IP.Equal(tcp.IP)
}

// closeWhileStopping wraps both servers' handlers: once serve is stopping,
// every answer says Connection: close (net/http then closes an HTTP/1
// connection after it, and sends GOAWAY on HTTP/2).
// Without a passed receiver socket the stop is today's (503), and the
// handlers stay as they are.
func (a *App) closeWhileStopping() {
	if a.hookHandover == nil {
		return
	}
	for _, srv := range []*http.Server{a.hookSrv, a.adminSrv} {
		h := srv.Handler
		srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cw := &closingWriter{ResponseWriter: w, stopping: &a.stopping}
			h.ServeHTTP(cw, r)
			if !cw.wrote && a.stopping.Load() {
				// Nothing written: net/http sends the header after this.
				w.Header().Set("Connection", "close")
			}
		})
	}
}

// closingWriter adds Connection: close when the header is written, so that
// a request read before the stop and answered after it says so too.
type closingWriter struct {
	http.ResponseWriter
	stopping *atomic.Bool
	wrote    bool
}

func (w *closingWriter) WriteHeader(code int) {
	if !w.wrote && code >= 200 {
		w.wrote = true
		if w.stopping.Load() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closingWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *closingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// handOver is the first part of Stop with passed sockets (see the top of
// this file). It returns false when the receiver's socket was bound by serve
// itself: Stop then answers 503 while it drains, as a new process cannot
// accept until this one has closed its socket anyway.
func (a *App) handOver(ctx context.Context) bool {
	if a.hookHandover == nil {
		return false
	}
	a.stopping.Store(true)
	_ = a.hookLn.Close() // our copy only: systemd's stays open, with its backlog
	if a.adminPassed {
		_ = a.adminLn.Close()
	}
	a.log.Info("stopping: no longer accepting; new connections wait in systemd's socket for the next process",
		"grace", restartGrace, "open_connections", a.hookHandover.open())
	grace := time.NewTimer(restartGrace)
	defer grace.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
wait:
	for a.hookHandover.open() > 0 {
		select {
		case <-grace.C:
			break wait
		case <-ctx.Done():
			break wait
		case <-tick.C:
		}
	}
	if n := a.hookHandover.cutReads(); n > 0 {
		a.log.Info("grace over: closing the connections still open", "connections", n)
	}
	return true
}

// handoverListener counts the receiver's open connections and can make
// every read on them fail at once (cutReads), net/http's own deadlines
// included.
type handoverListener struct {
	net.Listener
	cut   atomic.Bool
	mu    sync.Mutex
	conns map[*handoverConn]struct{}
}

func (l *handoverListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	hc := &handoverConn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[hc] = struct{}{}
	l.mu.Unlock()
	if l.cut.Load() {
		_ = hc.SetReadDeadline(aLongTimeAgo)
	}
	return hc, nil
}

func (l *handoverListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// cutReads makes every read on the open connections, and on any accepted
// later, fail now. It returns how many were open.
func (l *handoverListener) cutReads() int {
	l.cut.Store(true)
	l.mu.Lock()
	conns := make([]*handoverConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.SetReadDeadline(aLongTimeAgo)
	}
	return len(conns)
}

// aLongTimeAgo is a deadline already past.
var aLongTimeAgo = time.Unix(1, 0)

type handoverConn struct {
	net.Conn
	l    *handoverListener
	mu   sync.Mutex // orders a cut with net/http's own read deadlines
	once sync.Once
}

// SetReadDeadline and SetDeadline hold on to a cut: net/http sets new read
// deadlines for each request, which must not undo it.
func (c *handoverConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.l.cut.Load() {
		t = aLongTimeAgo
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *handoverConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

func (c *handoverConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return err
}

// isClosedListener: Serve's error once handOver closed our copy of a socket.
func isClosedListener(err error) bool { return errors.Is(err, net.ErrClosed) }

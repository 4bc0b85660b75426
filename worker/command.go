package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hookwarden/hookwarden"
)

const (
	// DefaultCommandTimeout bounds one run of a command.
	DefaultCommandTimeout = 60 * time.Second
	// DefaultKillGrace is how long a process group has between SIGTERM and
	// SIGKILL.
	DefaultKillGrace = 5 * time.Second
	// exitDataErr (EX_DATAERR from sysexits.h) is how a command declares an
	// event poison: dead-lettered at once.
	exitDataErr = 65
	// outputKeep bytes are kept from the start and from the end of the output.
	outputKeep = 32 << 10
	// groupPoll is how often a terminated group is checked for stragglers
	// during the kill grace.
	groupPoll = 20 * time.Millisecond
)

// inheritedEnv are the only variables a command inherits from hookwarden:
// its secrets and the rest of its environment stay out of the child.
var inheritedEnv = []string{"PATH", "HOME", "LANG"}

// CommandConfig configures a command destination. Commands run one at a
// time by default (DefaultCommandConcurrency); the config layer applies it.
type CommandConfig struct {
	Argv []string // program and arguments; no shell is involved
	// Env is added to the minimal inherited environment (PATH, HOME, LANG).
	// The HOOKWARDEN_* variables of the event always win.
	Env     map[string]string
	Workdir string // default: hookwarden's working directory
	// Timeout bounds one run; then the whole process group is terminated.
	// Default DefaultCommandTimeout.
	Timeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL; default DefaultKillGrace.
	KillGrace time.Duration
}

// Command delivers a job by running a program with the raw body on stdin.
// Exit 0 is Success, exit 65 (EX_DATAERR) Permanent, anything else, a
// timeout included, Transient. It is safe for concurrent use.
type Command struct {
	argv    []string
	env     []string // inherited + cfg.Env, sorted
	dir     string
	timeout time.Duration
	grace   time.Duration
}

// NewCommand validates cfg and returns a command deliverer. The program is
// looked up at each run, so a script deployed after start is found.
func NewCommand(cfg CommandConfig) (*Command, error) {
	if len(cfg.Argv) == 0 || cfg.Argv[0] == "" {
		return nil, errors.New("command destination: empty command")
	}
	if cfg.Timeout < 0 || cfg.KillGrace < 0 {
		return nil, errors.New("command destination: negative timeout or kill grace")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultCommandTimeout
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	env := map[string]string{}
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range cfg.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("command destination: invalid environment variable %q", k)
		}
		env[k] = v
	}
	c := &Command{
		argv:    slices.Clone(cfg.Argv),
		dir:     cfg.Workdir,
		timeout: cfg.Timeout,
		grace:   cfg.KillGrace,
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		c.env = append(c.env, k+"="+env[k])
	}
	return c, nil
}

// settings is what makes two commands the same (Pool.Apply): every field,
// the inherited environment included.
func (c *Command) settings() any { return *c }

// MaxDuration is the longest one run can take, kill grace included; the
// pool's lease covers it.
func (c *Command) MaxDuration() time.Duration { return c.timeout + 2*c.grace }

// Deliver runs the command once. The child gets its own process group; on
// timeout or when ctx is done the whole group gets SIGTERM, then SIGKILL after
// the kill grace. Output (stdout and stderr interleaved) is read as it comes,
// so the child never blocks on it, and kept capped: the first and last 32 KiB.
func (c *Command) Deliver(ctx context.Context, job *hookwarden.Job) Result {
	res := Result{ExitCode: -1, Class: Transient}
	vars := [][2]string{
		{"HOOKWARDEN_SOURCE", job.Source},
		{"HOOKWARDEN_EVENT_ID", job.EventID},
		{"HOOKWARDEN_EVENT_TYPE", job.EventType},
		{"HOOKWARDEN_ATTEMPT", strconv.Itoa(job.Attempt)},
		{"HOOKWARDEN_IDEMPOTENCY_KEY", job.IdempotencyKey()},
	}
	env := slices.Clip(c.env)
	for _, kv := range vars {
		if strings.ContainsRune(kv[1], 0) {
			res.Class = Permanent // fails the same way on every attempt
			res.Err = fmt.Errorf("%s contains a NUL byte", kv[0])
			return res
		}
		env = append(env, kv[0]+"="+kv[1]) // later entries win over cfg.Env
	}

	out := newCapture(outputKeep, outputKeep)
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Dir = c.dir
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(job.Body)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = procAttr()
	// A background grandchild may keep the output pipe open after the command
	// exited; stop waiting for it after the grace.
	cmd.WaitDelay = c.grace
	if err := cmd.Start(); err != nil {
		res.Err = fmt.Errorf("start: %w", err)
		return res
	}
	pgid := cmd.Process.Pid

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }() // always received below

	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	var err error
	var stopped error // why the group was terminated
	select {
	case err = <-waited:
	case <-timer.C:
		res.TimedOut = true
		stopped = fmt.Errorf("timed out after %s", c.timeout)
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			res.TimedOut = true
			stopped = fmt.Errorf("timed out: %w", context.Cause(ctx))
		} else {
			stopped = fmt.Errorf("cancelled: %w", context.Cause(ctx))
		}
	}
	if stopped != nil {
		err = c.terminate(pgid, waited)
	}
	res.Response = out.Bytes()
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}

	switch {
	case stopped != nil:
		res.Err = fmt.Errorf("%w; process group killed", stopped)
	case err == nil || errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState.Success():
		res.Class = Success
	case res.ExitCode == exitDataErr:
		res.Class = Permanent
		res.Err = errors.New("exit status 65 (EX_DATAERR): the command refused the event")
	default:
		res.Err = describeExit(err, cmd.ProcessState)
	}
	return res
}

// terminate sends SIGTERM to the process group, waits for the command and
// for the rest of the group for up to the kill grace, then SIGKILLs what is
// left. It returns the command's Wait error.
func (c *Command) terminate(pgid int, waited <-chan error) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	grace := time.NewTimer(c.grace)
	defer grace.Stop()
	var err error
	gotWait := false
	select {
	case err = <-waited:
		gotWait = true
	case <-grace.C:
	}
	if gotWait {
		// The leader is reaped; grandchildren may still be winding down.
		tick := time.NewTicker(groupPoll)
		defer tick.Stop()
	wait:
		for groupAlive(pgid) {
			select {
			case <-grace.C:
				break wait
			case <-tick.C:
			}
		}
	}
	if groupAlive(pgid) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	if !gotWait {
		err = <-waited
	}
	return err
}

// groupAlive reports whether any live process is left in the group. A
// zombie does not count: once its parent is gone it waits for init to reap
// it, and some container inits never do.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false // ESRCH: the group is empty
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true // no procfs: assume the worst, SIGKILL after the grace
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + p.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// "pid (comm) state ppid pgrp ...": comm may hold anything, even ")".
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		if f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

func describeExit(err error, ps *os.ProcessState) error {
	if ps == nil {
		return fmt.Errorf("wait: %w", err)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Errorf("killed by signal %s", ws.Signal())
	}
	return fmt.Errorf("exit status %d", ps.ExitCode())
}

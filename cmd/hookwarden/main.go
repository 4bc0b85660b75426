// Command hookwarden receives webhooks, records them durably in SQLite and
// delivers their effects to your application exactly once in effect.
//
// main only turns signals into a context and errors into exit codes (0 ok,
// 1 runtime failure, 2 usage or configuration error); everything else is in
// the subcommands, which tests run in-process.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError marks errors that exit 2: bad flags, bad configuration.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// globals are the flags every command shares.
type globals struct {
	configPath string
	dbPath     string
	write      bool // --write: a writing command may change a --db file no serve owns (guard.go)
	stdin      io.Reader
	stdout     io.Writer
	stderr     io.Writer
}

// Main runs one command line and returns the process exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Text output escapes control characters (safetext.go); --json and
	// --body write exact bytes through rawWriter.
	g := &globals{stdin: stdin, stdout: newSafeWriter(stdout), stderr: newSafeWriter(stderr)}
	root := &cobra.Command{
		Use:           "hookwarden",
		Short:         "A durable webhook receiver: verify, record in SQLite, deliver exactly once in effect",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// --version prints what `version` prints; the line holds no template braces.
	root.Version = versionString()
	root.SetVersionTemplate(versionLine() + "\n")
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.configPath, "config", "",
		"configuration file (default $HOOKWARDEN_CONFIG, ./config.yaml, /etc/hookwarden/config.yaml)")
	root.PersistentFlags().StringVar(&g.dbPath, "db", "", "database file; overrides database.path (read-only commands need no config with it)")
	root.PersistentFlags().BoolVar(&g.write, "write", false,
		"with --db: let a command that changes the database (replay, prune, ...) change a file no serve owns")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	for _, add := range commands {
		root.AddCommand(add(g))
	}

	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(g.stderr, "hookwarden:", err)
	var ue *usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		return 2
	}
	return 1
}

// commands are the subcommand constructors; each file adds its own.
var commands []func(*globals) *cobra.Command

// isCobraUsage recognises cobra's own argument errors (unknown command,
// wrong number of arguments), which it does not type.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "unknown flag", "unknown shorthand", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

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
	root := newRootCmd(g, args)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(g.stderr, "hookwarden:", err)
	// Root runs nothing: an error that stops there is cobra's unknown
	// command (flag errors are usageErrors already).
	var ue *usageError
	if errors.As(err, &ue) || cmd == root {
		return 2
	}
	return 1
}

// newRootCmd is the command tree: the global flags and every command.
func newRootCmd(g *globals, args []string) *cobra.Command {
	root := &cobra.Command{
		Use:   "hookwarden",
		Short: "A durable webhook receiver: verify, record in SQLite or PostgreSQL, deliver exactly once in effect",
		Long: `A durable webhook receiver: verify each provider's signature, record every
receipt in one SQLite file (database.path) or a PostgreSQL database shared by
several instances (database.url), answer fast, and deliver each event to your
application exactly once in effect, with retries, dead letters, replay and gap
reports. Start with "hookwarden serve --demo" (make run), then "hookwarden check".`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// --version prints what `version` prints; the line holds no template braces.
	root.Version = versionString()
	root.SetVersionTemplate(versionLine() + "\n")
	root.PersistentFlags().StringVar(&g.configPath, "config", "",
		"configuration file (default $HOOKWARDEN_CONFIG, ./config.yaml, /etc/hookwarden/config.yaml)")
	root.PersistentFlags().StringVar(&g.dbPath, "db", "", "SQLite database file; overrides database.path and database.url (read-only commands need no config with it)")
	root.PersistentFlags().BoolVar(&g.write, "write", false,
		"with --db: let a command that changes the database (replay, prune, ...) change a file no serve owns")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(
		newServeCmd(g),
		newCheckCmd(g),
		newEventsCmd(g),
		newDeadCmd(g),
		newQuarantineCmd(g),
		newReplayCmd(g),
		newPauseCmd(g),
		newResumeCmd(g),
		newStatsCmd(g),
		newGapsCmd(g),
		newPruneCmd(g),
		newBackupCmd(g),
		newExportCmd(g),
		newMigrateStoreCmd(g),
		newBackfillCmd(g),
		newSignCmd(g),
		newVersionCmd(g),
		newServeProfiledCmd(g), // hidden: make bench
		newBenchHistoryCmd(g),  // hidden: make bench, the history phase
	)
	// cobra adds `completion` when it runs; add it now so that its argument
	// checks are wrapped with the others.
	root.InitDefaultCompletionCmd(args...)
	wrapArgs(root)
	return root
}

// wrapArgs makes the positional-argument check of cmd and of every command
// under it (cobra.NoArgs, cobra.ExactArgs, ...) fail with a usageError, so a
// wrong argument, an unknown subcommand among them, exits 2. A command
// without a check (replay) validates its arguments itself.
func wrapArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				// "accepts 2 arg(s)" alone does not say which: give the usage
				// line of a command that takes arguments.
				if strings.Contains(c.Use, " ") {
					err = fmt.Errorf("%w\nusage: %s (see %s --help)", err, c.UseLine(), c.CommandPath())
				}
				return &usageError{err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		wrapArgs(sub)
	}
}

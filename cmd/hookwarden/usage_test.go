package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// runMainBounded is runMain with a deadline, so that a command which should
// have been refused but runs (serve) ends the test instead of hanging it.
func runMainBounded(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code = Main(ctx, args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// usageConfig is a valid configuration with a database that does not exist
// yet: a command that got past its argument check would run on it (and exit
// 0 or 1), so only the check itself can make these command lines exit 2.
func usageConfig(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "hw.db")
	return writeConfig(t, stdConfig(db, "", "http://127.0.0.1:9/hook", ""))
}

// TestCommandLineErrorsExit2: wrong arguments, unknown commands and subcommands,
// unknown flags and bad flag values exit 2 with cobra's message, and nothing
// runs (no output, no database created).
func TestCommandLineErrorsExit2(t *testing.T) {
	cfg := usageConfig(t)
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"frob"}, `unknown command "frob" for "hookwarden"`},
		{[]string{"evnts"}, "Did you mean this?\n\tevents"},
		{[]string{"events", "frob"}, `unknown command "frob" for "hookwarden events"`},
		{[]string{"dead", "frob"}, `unknown command "frob" for "hookwarden dead"`},
		{[]string{"quarantine", "frob"}, `unknown command "frob" for "hookwarden quarantine"`},
		{[]string{"events", "list", "x"}, `unknown command "x" for "hookwarden events list"`},
		{[]string{"events", "show", "std"}, "accepts 2 arg(s), received 1\nusage: hookwarden events show SOURCE EVENT_ID"},
		{[]string{"events", "show", "std", "a", "b"}, "accepts 2 arg(s), received 3"},
		{[]string{"dead", "list", "x"}, `unknown command "x" for "hookwarden dead list"`},
		{[]string{"quarantine", "list", "x"}, `unknown command "x" for "hookwarden quarantine list"`},
		{[]string{"quarantine", "show"}, "accepts 1 arg(s), received 0"},
		{[]string{"quarantine", "release", "1", "2"}, "accepts 1 arg(s), received 2"},
		{[]string{"quarantine", "drop"}, "accepts 1 arg(s), received 0"},
		{[]string{"backup"}, "accepts 1 arg(s), received 0"},
		{[]string{"backup", "a", "b"}, "accepts 1 arg(s), received 2"},
		{[]string{"serve", "x"}, `unknown command "x" for "hookwarden serve"`},
		{[]string{"check", "x"}, `unknown command "x" for "hookwarden check"`},
		{[]string{"stats", "x"}, `unknown command "x" for "hookwarden stats"`},
		{[]string{"gaps", "x"}, `unknown command "x" for "hookwarden gaps"`},
		{[]string{"prune", "x"}, `unknown command "x" for "hookwarden prune"`},
		{[]string{"sign", "x"}, `unknown command "x" for "hookwarden sign"`},
		{[]string{"version", "x"}, `unknown command "x" for "hookwarden version"`},
		{[]string{"serve-profiled", "x"}, `unknown command "x" for "hookwarden serve-profiled"`},
		{[]string{"completion", "bash", "x"}, `unknown command "x" for "hookwarden completion bash"`},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"stats", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"events", "list", "-z"}, "unknown shorthand flag: 'z' in -z"},
		{[]string{"events", "list", "--limit", "abc"}, `invalid argument "abc" for "--limit" flag`},
		{[]string{"replay"}, "replay: want SOURCE EVENT_ID... or --dead"}, // its own check
	} {
		code, out, errOut := runMainBounded(t, append([]string{"--config", cfg}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(cfg), "hw.db")); !os.IsNotExist(err) {
		t.Errorf("a refused command line touched the database: %v", err)
	}
}

// TestEveryCommandRefusesStrayArguments walks the whole command tree: every
// command that runs declares its arguments, but replay (which checks its
// own), and three stray ones exit 2 with cobra's message. Root runs nothing:
// an unknown command there is TestCommandLineErrorsExit2's.
func TestEveryCommandRefusesStrayArguments(t *testing.T) {
	cfg := usageConfig(t)
	root := newRootCmd(&globals{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}, nil)
	// root refuses an unknown command in Find (TestCommandLineErrorsExit2)
	unchecked := map[string]bool{"hookwarden": true, "hookwarden replay": true, "hookwarden help": true}
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		path := c.CommandPath()
		if !c.Runnable() {
			// cobra prints help for a command that runs nothing, before any
			// argument check: only its own `completion` is one
			if path != "hookwarden" && path != "hookwarden completion" {
				t.Errorf("%s runs nothing: give it a RunE that refuses a missing subcommand", path)
			}
			return
		}
		if c.Args == nil {
			if !unchecked[path] {
				t.Errorf("%s declares no Args: stray arguments would be ignored", path)
			}
			return
		}
		n++
		args := append([]string{"--config", cfg}, strings.Fields(path)[1:]...)
		code, out, errOut := runMainBounded(t, append(args, "stray1", "stray2", "stray3")...)
		if code != 2 || out != "" || !strings.Contains(errOut, "unknown command") && !strings.Contains(errOut, "accepts ") {
			t.Errorf("%s with stray arguments: exit %d, stdout %q, stderr %q; want exit 2", path, code, out, errOut)
		}
	}
	walk(root)
	if n < 20 {
		t.Errorf("walked %d commands with an argument check, want every one (20 or more)", n)
	}
}

// TestExitCodesBesideUsage: success is 0 and a runtime failure (a file that
// is not a database) is 1, not 2.
func TestExitCodesBesideUsage(t *testing.T) {
	if code, out, _ := runMain(t, "version"); code != 0 || out == "" {
		t.Errorf("version: exit %d, %q", code, out)
	}
	if code, _, _ := runMain(t); code != 0 {
		t.Errorf("no command (help): exit %d, want 0", code)
	}
	bad := filepath.Join(t.TempDir(), "bad.db")
	if err := os.WriteFile(bad, []byte("not a database, only text\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runMain(t, "stats", "--db", bad); code != 1 || !strings.Contains(errOut, "not a database") {
		t.Errorf("stats on a text file: exit %d, %q; want 1", code, errOut)
	}
}

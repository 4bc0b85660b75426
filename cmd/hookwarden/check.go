package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hookwarden/hookwarden/internal/config"
)

func newCheckCmd(g *globals) *cobra.Command {
	var offline bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Validate the configuration and print every problem with its key path",
		Long: `Validate the configuration and print every problem serve would stop on, each
with its key path. With database.url, check also connects to the database and
reports what serve would refuse there (the server unreachable, the credentials
or the database refused, fsync or synchronous_commit, a newer schema), each at
database.url; it writes nothing. --offline skips the connection.

It also reports what serve would stop on at start beyond the file: an SQLite
database marked as moved to PostgreSQL (migrate-store) or as an export, a listen
address another process holds (unless a serve owns this database: then it is
that serve's, as expected before a reload), and a command destination whose
program does not exist or is not executable.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := findConfig(g.configPath)
			if err != nil {
				return err
			}
			cfg, problems, err := loadConfigFile(path)
			if err != nil {
				return err
			}
			if !offline && cfg != nil && cfg.Database.Postgres() && !hasProblemAt(problems, "database.url") {
				problems = append(problems, checkConnect(cmd.Context(), cfg.Database)...)
			}
			if cfg != nil {
				problems = append(problems, checkStart(cmd.Context(), cfg, problems)...)
			}
			for _, p := range problems {
				fmt.Fprintln(g.stdout, p)
			}
			if n := len(config.Errors(problems)); n > 0 {
				return usageErrorf("%s: %d problem(s)", path, n)
			}
			fmt.Fprintf(g.stdout, "%s: ok\n", path)
			return nil
		},
	}
	cmd.Flags().BoolVar(&offline, "offline", false, "do not connect to database.url (check the file alone)")
	return cmd
}

// hasProblemAt reports whether an error was found at key already.
func hasProblemAt(ps []config.Problem, key string) bool {
	for _, p := range config.Errors(ps) {
		if p.Path == key {
			return true
		}
	}
	return false
}

// checkStart reports what serve would stop on when it starts that the file
// alone does not show: a marked SQLite file, a port in use, a command
// destination's missing program. It writes nothing.
func checkStart(ctx context.Context, cfg *config.Config, found []config.Problem) []config.Problem {
	var ps []config.Problem
	serveRuns := false // a serve owns this store: the ports are its own
	if !cfg.Database.Postgres() && !hasProblemAt(found, "database.path") {
		path := cfg.Database.Path
		if _, err := os.Stat(path); err == nil {
			if p, ok := checkMarks(ctx, path); !ok {
				ps = append(ps, p)
			}
			serveRuns = sqliteOwned(path)
		}
	}
	for _, l := range []struct{ key, addr string }{{"listen", cfg.Listen}, {"admin.listen", cfg.Admin.Listen}} {
		if serveRuns || hasProblemAt(found, l.key) {
			continue
		}
		ln, err := net.Listen("tcp", l.addr)
		if err == nil {
			ln.Close()
			continue
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			continue // a name that does not resolve here, a privileged port: serve says
		}
		p := config.Problem{Path: l.key, Message: fmt.Sprintf("%s is in use by another process: serve could not bind it", l.addr)}
		switch {
		case socketUnitInstalled():
			// systemd holds the port for serve (socket activation) while no
			// serve runs; check cannot tell it from a stranger.
			p.Warning = true
			p.Message += " (if systemd's hookwarden.socket holds it, serve takes it from systemd and this is fine)"
		case cfg.Database.Postgres():
			// Another serve of this host on the shared database holds it
			// before a reload; check cannot tell which process it is.
			p.Warning = true
			p.Message += " (if it is the running serve of this host, a reload is fine; a new serve here would stop)"
		}
		ps = append(ps, p)
	}
	for i, src := range cfg.Sources {
		for j, d := range src.Destinations {
			if len(d.Command) == 0 || d.Command[0] == "" {
				continue
			}
			if err := checkProgram(d.Command[0]); err != nil {
				ps = append(ps, config.Problem{Path: fmt.Sprintf("sources[%d].destinations[%d].command", i, j), Message: err.Error()})
			}
		}
	}
	return ps
}

// checkProgram says why a command destination's program cannot be run:
// a path must name an executable file; a bare name is looked up in PATH
// (check's own: under systemd serve has the unit's, usually /usr/bin:/bin).
func checkProgram(prog string) error {
	if strings.Contains(prog, "/") {
		fi, err := os.Stat(prog)
		switch {
		case err != nil:
			return fmt.Errorf("program %s: %w", prog, err)
		case fi.IsDir():
			return fmt.Errorf("program %s is a directory", prog)
		case fi.Mode().Perm()&0o111 == 0:
			return fmt.Errorf("program %s is not executable (chmod +x)", prog)
		}
		return nil
	}
	if _, err := exec.LookPath(prog); err != nil {
		return fmt.Errorf("program %q is not in PATH (%s): give its absolute path", prog, os.Getenv("PATH"))
	}
	return nil
}

// socketUnits are where the .deb and make install put the socket unit.
var socketUnits = []string{"/lib/systemd/system/hookwarden.socket", "/etc/systemd/system/hookwarden.socket"}

// socketUnitInstalled reports whether a hookwarden.socket unit is installed
// on this host, so that a held listen port may be systemd's, for serve.
func socketUnitInstalled() bool {
	for _, f := range socketUnits {
		if _, err := os.Stat(f); err == nil {
			return true
		}
	}
	return false
}

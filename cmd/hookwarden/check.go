package main

import (
	"fmt"

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
database.url; it writes nothing. --offline skips the connection.`,
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

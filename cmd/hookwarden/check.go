package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hookwarden/hookwarden/internal/config"
)

func newCheckCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Validate the configuration and print every problem with its key path",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := findConfig(g.configPath)
			if err != nil {
				return err
			}
			_, problems, err := loadConfigFile(path)
			if err != nil {
				return err
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
}

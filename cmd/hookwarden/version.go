package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is stamped by the Makefile with -ldflags "-X main.version=...".
var version = ""

// versionString falls back to the module version or VCS revision in the build info.
func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return "dev"
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print version and build information",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(g.stdout, versionLine())
			return nil
		},
	}
}

// versionLine is what `version` and `--version` print.
func versionLine() string {
	return fmt.Sprintf("hookwarden %s (%s, %s/%s, schema %d)",
		versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH, schemaVersion())
}

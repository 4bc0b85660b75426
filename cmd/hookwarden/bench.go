package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"

	"github.com/spf13/cobra"
)

// newServeProfiledCmd is `serve` writing CPU and heap profiles, for the
// benchmark harness (make bench PROFILE=dir). Hidden: it is a tool for
// developers, and profiling costs a few per cent of CPU. The profiles are
// written when serve returns after SIGTERM/SIGINT.
func newServeProfiledCmd(g *globals) *cobra.Command {
	var cpuPath, memPath, tracePath string
	cmd := &cobra.Command{
		Use:    "serve-profiled",
		Short:  "serve, writing CPU and heap profiles on stop (for make bench)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cpuPath == "" && memPath == "" && tracePath == "" {
				return usageErrorf("serve-profiled: want --cpuprofile, --memprofile or --trace")
			}
			if tracePath != "" {
				f, err := os.Create(tracePath)
				if err != nil {
					return fmt.Errorf("trace: %w", err)
				}
				defer f.Close()
				if err := trace.Start(f); err != nil {
					return fmt.Errorf("trace: %w", err)
				}
				defer trace.Stop()
			}
			if cpuPath != "" {
				f, err := os.Create(cpuPath)
				if err != nil {
					return fmt.Errorf("cpu profile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("cpu profile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			serve := newServeCmd(g)
			serve.SetContext(cmd.Context())
			err := serve.RunE(serve, nil)
			if memPath != "" {
				runtime.GC() // up-to-date statistics
				f, ferr := os.Create(memPath)
				if ferr == nil {
					ferr = pprof.Lookup("heap").WriteTo(f, 0)
					ferr = errors.Join(ferr, f.Close())
				}
				if ferr != nil {
					err = errors.Join(err, fmt.Errorf("heap profile: %w", ferr))
				}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&cpuPath, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	cmd.Flags().StringVar(&memPath, "memprofile", "", "write a heap profile at stop to this file")
	cmd.Flags().StringVar(&tracePath, "trace", "", "write an execution trace of the whole run to this file (large)")
	return cmd
}

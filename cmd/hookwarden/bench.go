package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"time"

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

// newBenchHistoryCmd writes a synthetic history into a new database file
// (--db) or an empty PostgreSQL database (--url), for the benchmark
// harness's history phase (make bench). Hidden: a tool for developers. The
// store is then served and measured like any other.
func newBenchHistoryCmd(g *globals) *cobra.Command {
	var claims, payloads, body int
	var url string
	cmd := &cobra.Command{
		Use:    "bench-history",
		Short:  "write a synthetic history of claims into a new --db file or an empty --url database (for make bench)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (g.dbPath == "") == (url == "") || claims <= 0 || payloads < 0 {
				return usageErrorf("bench-history: want --db FILE or --url postgres://..., --claims N > 0, --payloads M >= 0")
			}
			if g.dbPath != "" {
				if _, err := os.Stat(g.dbPath); err == nil {
					return fmt.Errorf("bench-history: %s exists: the history goes into a new file", g.dbPath)
				}
			}
			start := time.Now()
			last := start
			err := fillHistory(cmd.Context(), g.dbPath, url, claims, payloads, body, func(done int) {
				if time.Since(last) >= 10*time.Second || done == claims {
					last = time.Now()
					fmt.Fprintf(cmd.ErrOrStderr(), "bench-history: %d of %d claims, %.0fs\n", done, claims, time.Since(start).Seconds())
				}
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%.3f\n", time.Since(start).Seconds())
			return nil
		},
	}
	cmd.Flags().IntVar(&claims, "claims", 10_000_000, "claims in all")
	cmd.Flags().IntVar(&payloads, "payloads", 1_000_000, "the newest claims that keep their payloads")
	cmd.Flags().IntVar(&body, "body", 1024, "body bytes of each kept payload")
	cmd.Flags().StringVar(&url, "url", "", "an empty PostgreSQL database to write the history into, instead of --db")
	return cmd
}

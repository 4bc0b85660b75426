package main

import (
	"errors"
	"fmt"
	"github.com/hookwarden/hookwarden"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookwarden/hookwarden/internal/config"
)

func newReplayCmd(g *globals) *cobra.Command {
	var sel hookwarden.ReplaySelector
	var opt hookwarden.ReplayOptions
	var since string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "replay (SOURCE EVENT_ID... | --dead [--source S] [--destination D] [--since DUR])",
		Short: "Deliver events again: reset their jobs to pending with a full set of attempts",
		Long: `Reset jobs to pending, due now, with their attempt count at 0, so each gets its
destination's full max_attempts again. The Idempotency-Key stays SOURCE:EVENT_ID.

  replay SOURCE EVENT_ID...   every job of these events (dead or delivered; a
                              pending one is made due now; one in flight is left)
  replay --dead               every dead letter, narrowed by --source,
                              --destination and --since

A job dead-lettered 3 times needs --force: the app refused it thrice. An event
whose payload was pruned cannot be replayed. Jobs are reset in batches of 500,
each a short write, so a running serve keeps ingesting; it picks the jobs up
within about a second. Every id not replayed is named with the reason; when
nothing was replayed the command exits 1.

With --db, the file must be owned by a running serve (it is then the live
database), or --write must be given: a copy kept for forensics is never
changed by accident. Each replay is kept in the audit log (events show).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case sel.Dead && len(args) > 0:
				return usageErrorf("replay: --dead or SOURCE EVENT_ID..., not both")
			case !sel.Dead && len(args) < 2:
				return usageErrorf("replay: want SOURCE EVENT_ID... or --dead")
			case !sel.Dead && since != "":
				return usageErrorf("replay: --since goes with --dead")
			case !sel.Dead && sel.Source != "":
				return usageErrorf("replay: the source is the first argument; --source goes with --dead")
			}
			if !sel.Dead {
				sel.Source, sel.EventIDs = args[0], args[1:]
			}
			var err error
			if sel.Since, err = sinceFlag(since, time.Now()); err != nil {
				return err
			}
			ctx := cmd.Context()
			s, cfg, target, err := g.openWriteStore(ctx, "replay")
			if err != nil {
				return err
			}
			defer s.Close()
			opt.Audit = cliAudit()

			bar := newProgress(g.stderr, "replay")
			opt.Progress = func(done, total int) {
				if total > opt.BatchSize || bar.tty {
					bar.update(int64(done), int64(total), "jobs")
				}
			}
			if opt.BatchSize <= 0 {
				opt.BatchSize = hookwarden.DefaultReplayBatch
			}
			res, err := s.Replay(ctx, sel, opt)
			bar.finish()
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSONLine(g.stdout, res); err != nil {
					return err
				}
			} else {
				printReplay(g, res, target, cfg != nil, destinationSet(cfg))
			}
			switch {
			case res.Replayed == 0 && len(res.Skipped) == 0:
				return errors.New("replay: nothing matched")
			case res.Replayed == 0:
				return errors.New("replay: nothing replayed")
			case len(res.Skipped) > 0:
				return fmt.Errorf("replay: %s not replayed", plural(len(res.Skipped), "job or event", "jobs or events"))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&sel.Dead, "dead", false, "replay dead letters (narrow with --source, --destination, --since)")
	fl.StringVar(&sel.Source, "source", "", "with --dead: only this source")
	fl.StringVar(&sel.Destination, "destination", "", `only jobs of this destination ("source/name")`)
	fl.StringVar(&since, "since", "", "with --dead: only dead-lettered in this last duration (90m, 7d)")
	fl.BoolVar(&opt.Force, "force", false, "also replay jobs dead-lettered 3 times or more")
	fl.IntVar(&opt.BatchSize, "batch", hookwarden.DefaultReplayBatch, "jobs per write transaction")
	fl.BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	return cmd
}

func destinationSet(cfg *config.Config) map[string]bool {
	if cfg == nil {
		return nil
	}
	set := map[string]bool{}
	for _, d := range destinationNames(cfg) {
		set[d] = true
	}
	return set
}

// printReplay says what a replay did, and only that: what was not replayed
// and why on stderr, the success line only when a job was reset.
func printReplay(g *globals, res hookwarden.ReplayResult, target writeTarget, haveConfig bool, configured map[string]bool) {
	for _, k := range res.Skipped {
		fmt.Fprintln(g.stderr, "not replayed:", k)
	}
	if res.Replayed == 0 {
		switch {
		case res.Selected > 0:
			fmt.Fprintf(g.stdout, "replayed none of %s: nothing changed\n", plural(res.Selected, "job", "jobs"))
		case len(res.Skipped) > 0:
			fmt.Fprintln(g.stdout, "replayed nothing: nothing changed")
		}
		return
	}
	fmt.Fprintf(g.stdout, "replayed %d of %s: due now, same Idempotency-Key; %s\n",
		res.Replayed, plural(res.Selected, "job", "jobs"), target.deliveryNote())
	if haveConfig {
		for _, d := range res.Destinations {
			if !configured[d] {
				fmt.Fprintf(g.stderr, "warning: destination %s is not in the configuration: its jobs wait until it is\n", d)
			}
		}
	}
}

package main

// pause and resume (docs/reference.md, "Flow control"): hold or restart a
// destination's deliveries. The state is in the store, so the running
// serve (and every serve on a shared store) obeys it at its next lease,
// and it survives restarts and reloads.

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/config"
)

func newPauseCmd(g *globals) *cobra.Command {
	return newPauseResumeCmd(g, "pause", "Hold a destination's deliveries: no attempts, no probes, until resume",
		`Pause DESTINATION ("source/name"): from its next lease, no attempt is made
and no probe is sent, however long it lasts; nothing is dropped, jobs keep
their attempts and new events queue up. The pause is kept in the database, so
it survives restarts and reloads (and holds for every serve of a shared
store) until "hookwarden resume". Pausing a paused destination changes
nothing and exits 0. Attempts already in flight finish.

Like the other writing commands it is kept in the audit log, and with --db it
changes a file only when a serve owns it or --write is given.`)
}

func newResumeCmd(g *globals) *cobra.Command {
	return newPauseResumeCmd(g, "resume", "Restart a paused destination's deliveries",
		`Resume DESTINATION ("source/name"): end its pause, manual or automatic
(pause_after), and forget its failure streak; the running serve drains the
waiting jobs within a second or two. Resuming a destination that is not
paused changes nothing and exits 0. Kept in the audit log.`)
}

func newPauseResumeCmd(g *globals, action, short, long string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   action + " DESTINATION",
		Short: short,
		Long:  long,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dest := args[0]
			cfg, err := g.optionalConfig()
			if err != nil {
				return err
			}
			if src, name, ok := strings.Cut(dest, "/"); !ok || src == "" || name == "" || strings.Contains(name, "/") {
				return usageErrorf("%s: %q: want a destination as source/name%s", action, dest, knownDestinations(cfg))
			}
			// A typo must not pause (or create state for) a destination
			// that does not exist; with --db alone there is no list.
			if cfg != nil && !destinationSet(cfg)[dest] {
				return usageErrorf("%s: no destination %s in the configuration%s", action, dest, knownDestinations(cfg))
			}
			ctx := cmd.Context()
			s, cfg, target, err := g.openWriteStore(ctx, action)
			if err != nil {
				return err
			}
			defer s.Close()
			audit := cliAudit()
			audit.Args = auditArgs(map[string]any{"destination": dest})
			var changed bool
			if action == "pause" {
				changed, err = s.Pause(ctx, dest, audit)
			} else {
				changed, err = s.Resume(ctx, dest, audit)
			}
			if err != nil {
				return err
			}
			if asJSON {
				st, err := s.Destinations(ctx, []string{dest})
				if err != nil {
					return err
				}
				withRates(st, cfg)
				return writeJSONLine(g.stdout, st[0])
			}
			switch {
			case !changed && action == "pause":
				fmt.Fprintf(g.stdout, "%s was paused already: nothing changed\n", dest)
			case !changed:
				fmt.Fprintf(g.stdout, "%s was not paused: nothing changed\n", dest)
			case action == "pause":
				fmt.Fprintf(g.stdout, "paused %s: no attempts and no probes until `hookwarden resume %s`\n", dest, dest)
			case target.Served:
				fmt.Fprintf(g.stdout, "resumed %s: %s picks its jobs up within a second or two\n", dest, target.Owner)
			default:
				fmt.Fprintf(g.stdout, "resumed %s: no serve runs on this file; its jobs are delivered when one starts\n", dest)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the destination's state as one JSON object")
	return cmd
}

// withRates fills each state's configured rate (the store does not know
// how the operator wrote it).
func withRates(states []hookwarden.DestinationState, cfg *config.Config) {
	if cfg == nil {
		return
	}
	rates := destinationRates(cfg)
	for i := range states {
		if r := rates[states[i].Destination]; r != "" {
			states[i].Rate = &r
		}
	}
}

// destinationRates maps each configured destination to its rate key ("" none).
func destinationRates(cfg *config.Config) map[string]string {
	m := map[string]string{}
	for _, s := range cfg.Sources {
		for _, d := range s.Destinations {
			m[d.FullName(s.Name)] = d.Rate
		}
	}
	return m
}

// knownDestinations is ": the destinations are a/b, c/d" for a refusal, or
// "" without a configuration.
func knownDestinations(cfg *config.Config) string {
	if cfg == nil {
		return ""
	}
	names := destinationNames(cfg)
	if len(names) == 0 {
		return ""
	}
	return "; the destinations are " + strings.Join(names, ", ")
}

package main

// export and migrate-store: copies of a store's rows (store.go does them).

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/config"
)

func newExportCmd(g *globals) *cobra.Command {
	var since string
	cmd := &cobra.Command{
		Use:   "export FILE",
		Short: "Write an SQLite file in Hookwarden's schema from the live store, for offline forensics",
		Long: `Write the live store (SQLite or PostgreSQL) into FILE, a new SQLite file in
this build's schema, from one consistent snapshot: every --db command (events,
stats, dead, gaps, quarantine) and the forensic queries of docs/forensics.md
read it. FILE must not exist; it appears complete or not at all.

--since DUR copies only the events claimed in that last duration (with their
receipts, jobs and attempts), the requests held in it, and the runs and audit
entries of the window; the file is then marked partial, and the --db commands
say so. serve refuses to run on an exported file.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dest := args[0]
			ctx := cmd.Context()
			var from time.Time
			if since != "" {
				var err error
				if from, err = sinceFlag(since, time.Now()); err != nil {
					return err
				}
			}
			s, _, err := g.openStore(ctx, true)
			if err != nil {
				return err
			}
			defer s.Close()
			log := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			counts, err := exportStore(ctx, s, dest, from, log)
			if errors.Is(err, hookwarden.ErrExists) {
				return usageErrorf("export: %s exists; an export never overwrites: choose a new file name", dest)
			}
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			what := "full"
			if !from.IsZero() {
				what = "partial, since " + from.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(g.stdout, "export: %s from %s (%s): %s\n", dest, s.Path(), what, countLine(counts))
			return nil
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "only what happened in this last duration (90m, 7d); the file is marked partial")
	return cmd
}

func newMigrateStoreCmd(g *globals) *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "migrate-store --to URL",
		Short: "Copy a stopped SQLite database into an empty PostgreSQL database and mark the file as moved",
		Long: `Copy the SQLite database of database.path (or --db), which no serve may be
running on, into the empty PostgreSQL database at URL (a postgres:// URL, or a
secret reference such as env:DATABASE_URL, which keeps the password off the
command line). The file is held for the whole copy, so no serve can start on
it. Every table's rows are counted on both sides and must agree; then the file
is marked as moved, so that a serve started on it later refuses (naming the
database it went to), and the copy is committed. A database that already holds
runs or events is refused. Then set database.url (and remove database.path)
and start serve: docs/scale-out.md goes through it step by step.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return usageErrorf("migrate-store: --to URL is required (the PostgreSQL database to copy into)")
			}
			cfg, err := g.optionalConfig()
			if err != nil {
				return err
			}
			path := g.dbPath
			if cfg != nil {
				if cfg.Database.Postgres() {
					return usageErrorf("migrate-store: this configuration's store is database.url already; " +
						"migrate-store copies the SQLite file of database.path (or --db FILE)")
				}
				path = cfg.Database.Path
			}
			log := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			res, err := migrateStore(cmd.Context(), path, config.Secret(to), log)
			if err != nil {
				return fmt.Errorf("migrate-store: %w", err)
			}
			fmt.Fprintf(g.stdout, "migrate-store: %s copied into %s, counts verified: %s\n", path, res.Target, countLine(res.Counts))
			fmt.Fprintf(g.stdout, "%s is marked as moved: serve refuses it from now on. Next: set database.url "+
				"(and remove database.path) in the configuration, then start serve.\n", path)
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the empty PostgreSQL database: postgres://USER@HOST/DB, or env:NAME / file:PATH")
	return cmd
}

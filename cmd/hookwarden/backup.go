package main

import (
	"errors"
	"fmt"
	"github.com/hookwarden/hookwarden"
	"os"

	"github.com/spf13/cobra"
)

func newBackupCmd(g *globals) *cobra.Command {
	var noVerify bool
	cmd := &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a consistent snapshot of the live database to FILE (safe while serve runs)",
		Long: `Write a consistent snapshot of the database to FILE with SQLite's VACUUM INTO,
from a read-only connection: serve keeps receiving meanwhile. FILE must not
exist (a backup never overwrites); it appears complete or not at all. The copy
is then checked (PRAGMA quick_check) and is readable by every read-only
command with --db FILE.

On PostgreSQL (database.url) backup refuses (exit 2): use pg_dump or your
provider's backups for the database, and hookwarden export FILE for an SQLite
copy that every --db command reads.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dest := args[0]
			if _, err := os.Lstat(dest); err == nil {
				return usageErrorf("backup: %s exists; a backup never overwrites: choose a new file name", dest)
			}
			ctx := cmd.Context()
			if cfg, err := g.optionalConfig(); err != nil {
				return err
			} else if cfg != nil {
				if err := backupRefusal(cfg.Database); err != nil {
					return usageErrorf("%v", err)
				}
			}
			s, _, err := g.openStore(ctx, true)
			if err != nil {
				return err
			}
			defer s.Close()
			bar := newProgress(g.stderr, "backup")
			var show func(written, total int64)
			if bar.tty {
				show = func(w, t int64) { bar.update(w, t, "") }
			}
			err = s.Backup(ctx, dest, show)
			bar.finish()
			if errors.Is(err, hookwarden.ErrExists) || errors.Is(err, hookwarden.ErrNotSupported) {
				return usageErrorf("%v", err)
			}
			if err != nil {
				return err
			}
			size := int64(0)
			if fi, err := os.Stat(dest); err == nil {
				size = fi.Size()
			}
			if noVerify {
				fmt.Fprintf(g.stdout, "backup: %s (%s)\n", dest, fmtBytes(size))
				return nil
			}
			if err := verifyBackup(ctx, dest); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "backup: %s (%s), quick_check ok\n", dest, fmtBytes(size))
			return nil
		},
	}
	cmd.Flags().BoolVar(&noVerify, "no-verify", false, "skip the quick_check of the copy")
	return cmd
}

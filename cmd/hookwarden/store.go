package main

// The one place the program picks its store. Everything else in this
// package, internal/admin and worker takes hookwarden.Store (or a smaller
// role of it); only here is the implementation named. Today it is always
// sqlitestore on the file of database.path (or --db); a second store plugs
// in here.

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// openStoreFile opens the store at path for an operator command. readOnly
// opens it with no writer and no migration: the file is never changed.
func openStoreFile(ctx context.Context, path string, readOnly bool, log *slog.Logger) (hookwarden.Store, error) {
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{ReadOnly: readOnly, Logger: log})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// openServeStore makes this process the owner of the store at path (one
// serve per file: a second would run workers on the same jobs) and opens it
// for writing. unlock gives the ownership up; call it after Close.
func openServeStore(ctx context.Context, path string, log *slog.Logger,
	onCommit func(batch int, d time.Duration, err error)) (s hookwarden.Store, unlock func() error, err error) {
	owner, err := sqlitestore.LockOwner(path, "hookwarden serve")
	if err != nil {
		return nil, nil, err
	}
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Logger: log, OnCommit: onCommit})
	if err != nil {
		_ = owner.Release()
		return nil, nil, fmt.Errorf("database.path %s: %w", path, err)
	}
	return st, owner.Release, nil
}

// storeOwner says whether a serve owns the store at path, and which (its
// String names it for messages). It never creates anything.
func storeOwner(path string) (owner fmt.Stringer, owned bool, err error) {
	info, owned, err := sqlitestore.Owner(path)
	return info, owned, err
}

// schemaVersion is the schema version this build's store writes.
func schemaVersion() int { return sqlitestore.SchemaVersion() }

// verifyBackup opens the copy the way `--db FILE` will and checks it.
func verifyBackup(ctx context.Context, path string) error {
	b, err := sqlitestore.Open(ctx, path, sqlitestore.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("backup written to %s but it does not open: %w", path, err)
	}
	defer b.Close()
	var res string
	if err := b.DB().QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&res); err != nil {
		return fmt.Errorf("backup %s: quick_check: %w", path, err)
	}
	if res != "ok" {
		return fmt.Errorf("backup %s: quick_check: %s", path, res)
	}
	return nil
}

// fillHistory writes the benchmark's synthetic history into a new store at
// path (make bench, the history phase): claims in all, payloads of them
// kept whole, each payload body bytes.
func fillHistory(ctx context.Context, path string, claims, payloads, body int, progress func(done int)) error {
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	if err != nil {
		return err
	}
	err = st.FillHistory(ctx, sqlitestore.History{Claims: claims, Payloads: payloads, Source: "bench", Body: body}, progress)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return err
}

package main

// The guard of the commands that change the database (docs/reference.md, "Forensic copies and --write"):
// replay, prune, quarantine release and drop, pause, resume, backfill.
// --db names a file with no configuration around it, most often a copy
// taken for forensics; such a file is changed only when a serve owns it
// (then it is the live database) or when --write says so.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strconv"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/config"
)

// writeTarget is the database a writing command is about to change.
type writeTarget struct {
	Path string
	// Served: a serve owns the file (its owner lock is held), so it picks
	// up what the command changes (replayed jobs, resumed destinations).
	Served bool
	Owner  fmt.Stringer // the serve that owns it, when Served
	// Shared: a database several serve processes share (PostgreSQL), not a
	// file.
	Shared bool
}

// deliveryNote says who delivers what the command made due.
func (t writeTarget) deliveryNote() string {
	if t.Served {
		return fmt.Sprintf("%s delivers them within a second or two", t.Owner)
	}
	if t.Shared {
		return "no serve runs on this database: they are delivered when one starts on it"
	}
	return "no serve runs on this file: they are delivered when one starts on it"
}

// guardWrite is the check of every command that changes the database; call
// it before opening the store (opening migrates the file). path is the
// database the command would change; command names it in the refusal. With
// --db, a file that no serve owns is refused (exit 2) unless --write.
func (g *globals) guardWrite(command, path string) (writeTarget, error) {
	t := writeTarget{Path: path}
	info, owned, err := storeOwner(path)
	if err != nil {
		return t, err
	}
	t.Served, t.Owner = owned, info
	if g.dbPath != "" && !owned && !g.write {
		return t, usageErrorf("%s: no serve owns %s, so it may be a copy kept for forensics: "+
			"refusing to change it; add --write to change it anyway", command, path)
	}
	return t, nil
}

// openWriteStore is openStore for a command that changes the database:
// the configuration (nil with --db alone), guardWrite, and a store open for
// writing on an existing file (a mistyped path must not become a new, empty
// database).
func (g *globals) openWriteStore(ctx context.Context, command string) (hookwarden.Store, *config.Config, writeTarget, error) {
	cfg, err := g.optionalConfig()
	if err != nil {
		return nil, nil, writeTarget{}, err
	}
	log := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if cfg != nil && cfg.Database.Postgres() {
		// A shared database is the live store: no forensic copy to guard.
		s, err := openStoreURL(ctx, cfg.Database, log)
		if err != nil {
			return nil, nil, writeTarget{}, err
		}
		t := writeTarget{Path: s.Path(), Shared: true}
		if count, ok := liveInstances(s); ok {
			if n, err := count(ctx, gapStale); err == nil && n > 0 {
				t.Served, t.Owner = true, instancesNote(n)
			}
		}
		return s, cfg, t, nil
	}
	path := g.dbPath
	if cfg != nil {
		path = cfg.Database.Path
	}
	if _, err := os.Stat(path); err != nil {
		return nil, nil, writeTarget{}, noDatabase(path, err)
	}
	t, err := g.guardWrite(command, path)
	if err != nil {
		return nil, nil, t, err
	}
	s, err := openStoreFile(ctx, path, false, log)
	if err != nil {
		return nil, nil, t, err
	}
	return s, cfg, t, nil
}

// instancesNote names the serve processes on a shared store, for
// deliveryNote.
type instancesNote int

func (n instancesNote) String() string {
	if n == 1 {
		return "the serve process on this database"
	}
	return fmt.Sprintf("the %d serve processes on this database", int(n))
}

// cliAudit is the audit origin of an action run from this command line: the
// OS user who ran it.
func cliAudit() *hookwarden.AuditEntry {
	return &hookwarden.AuditEntry{Origin: hookwarden.AuditCLI, Actor: osUser()}
}

func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return n
	}
	return "uid " + strconv.Itoa(os.Getuid())
}

// auditArgs is an action's arguments as the audit log keeps them: a JSON
// object (the values are plain, so Marshal cannot fail).
func auditArgs(args map[string]any) json.RawMessage {
	b, _ := json.Marshal(args)
	return b
}

package pgstore

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// open opens a store on url and closes it when t ends.
func open(t testing.TB, url string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// countHandler counts log records by message.
type countHandler struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.n[r.Message]++
	h.mu.Unlock()
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

// TestMigrateConcurrently: three instances opening an empty database at
// once migrate it once, and all of them start.
func TestMigrateConcurrently(t *testing.T) {
	url := pgtest.Database(t)
	h := &countHandler{n: map[string]int{}}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	start := make(chan struct{})
	for i := range errs {
		wg.Go(func() {
			<-start
			s, err := Open(context.Background(), url, Options{Logger: slog.New(h)})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := h.n["database migrated"]; n != SchemaVersion() {
		t.Fatalf("%d migrations ran over 3 opens, want %d (once each)", n, SchemaVersion())
	}
	s := open(t, url, Options{})
	var v int
	if err := s.Pool().QueryRow(context.Background(), `SELECT version FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion() {
		t.Fatalf("schema version %d %v, want %d", v, err, SchemaVersion())
	}
}

// TestNewerSchemaRefused: a database migrated by a newer build is refused
// with the versions named.
func TestNewerSchemaRefused(t *testing.T) {
	url := pgtest.Database(t)
	s := open(t, url, Options{})
	if _, err := s.Pool().Exec(context.Background(), `UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []Options{{}, {NoMigrate: true}} {
		_, err := Open(context.Background(), url, opts)
		if !errors.Is(err, ErrNewerSchema) || !strings.Contains(err.Error(), "99") {
			t.Fatalf("open (NoMigrate %v) of a newer schema: %v, want ErrNewerSchema naming version 99", opts.NoMigrate, err)
		}
	}
}

// TestSettingsRefused: synchronous_commit=off, local while a synchronous
// standby is named, and fsync=off are refused, each naming the setting; a
// running store refuses a new connection with the setting turned off.
func TestSettingsRefused(t *testing.T) {
	ctx := context.Background()
	t.Run("SynchronousCommitOff", func(t *testing.T) {
		t.Parallel()
		url := pgtest.Database(t)
		s := open(t, url, Options{})
		db := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
		if _, err := s.Pool().Exec(ctx, `ALTER DATABASE `+db+` SET synchronous_commit = off`); err != nil {
			t.Fatal(err)
		}
		_, err := Open(ctx, url, Options{})
		var se *SettingError
		if !errors.As(err, &se) || se.Setting != "synchronous_commit" || !strings.Contains(err.Error(), "synchronous_commit = off") {
			t.Fatalf("open with synchronous_commit=off: %v, want a SettingError naming it", err)
		}
		// The running store: its next new connection is refused, and
		// Record answers unavailable (503) naming the setting.
		s.Pool().Reset()
		_, err = s.Record(ctx, receipt("std", "e1", `{}`, "std/app"))
		if !errors.Is(err, hookwarden.ErrUnavailable) || !errors.As(err, &se) {
			t.Fatalf("record on a refused connection: %v, want ErrUnavailable with the SettingError", err)
		}
	})
	t.Run("LocalWithStandby", func(t *testing.T) {
		t.Parallel()
		// local in the server's config: commits here need no standby.
		c := pgtest.Start(t, pgtest.Settings{"synchronous_standby_names": "'nobody'", "synchronous_commit": "local"})
		_, err := Open(ctx, c.URL(""), Options{})
		var se *SettingError
		if !errors.As(err, &se) || se.Setting != "synchronous_commit" || !strings.Contains(err.Error(), "synchronous_standby_names") {
			t.Fatalf("open with local and a standby: %v, want a SettingError naming synchronous_commit", err)
		}
		if err := c.Exec(ctx, "", `ALTER SYSTEM SET fsync = off`); err != nil {
			t.Fatal(err)
		}
		if err := c.Exec(ctx, "", `SELECT pg_reload_conf()`); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err = Open(ctx, c.URL(""), Options{})
			if errors.As(err, &se) && se.Setting == "fsync" || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond) // the reload is asynchronous
		}
		if !errors.As(err, &se) || se.Setting != "fsync" || !strings.Contains(err.Error(), "fsync = off") {
			t.Fatalf("open with fsync=off: %v, want a SettingError naming fsync", err)
		}
	})
}

// TestDatabaseDownIsUnavailable: with the server gone, Record fails within
// its bound with ErrUnavailable, the receiver's 503.
func TestDatabaseDownIsUnavailable(t *testing.T) {
	c := pgtest.Start(t)
	s := open(t, c.URL(""), Options{Timeout: 3 * time.Second})
	ctx := context.Background()
	if _, err := s.Record(ctx, receipt("std", "e1", `{}`, "std/app")); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			_, err := s.Record(ctx, receipt("std", "down-"+string(rune('a'+i)), `{}`, "std/app"))
			if errors.Is(err, hookwarden.ErrUnavailable) {
				n.Add(1)
			} else {
				t.Errorf("record with the database down: %v, want ErrUnavailable", err)
			}
		})
	}
	wg.Wait()
	if n.Load() != 8 {
		t.Fatalf("%d of 8 unavailable", n.Load())
	}
}

// TestCommitLost: the connection dies as the commit is sent: Record answers
// ErrUnavailable (503), never a success, and the provider's retry is then
// recorded once.
func TestCommitLost(t *testing.T) {
	// Not parallel: the hook is the package's.
	url := pgtest.Database(t)
	s := open(t, url, Options{})
	ctx := context.Background()
	testBeforeCommit = func(ctx context.Context, tx pgx.Tx) {
		var pid int
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Error(err)
			return
		}
		if _, err := s.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Error(err)
		}
	}
	_, err := s.Record(ctx, receipt("std", "lost", `{}`, "std/app"))
	testBeforeCommit = nil
	if !errors.Is(err, hookwarden.ErrUnavailable) || !errors.Is(err, errCommit) {
		t.Fatalf("record whose commit was cut off: %v, want ErrUnavailable (commit outcome unknown)", err)
	}
	res, err := s.Record(ctx, receipt("std", "lost", `{}`, "std/app"))
	if err != nil || res.Outcome != hookwarden.Accepted {
		t.Fatalf("the provider's retry: %+v %v, want accepted", res, err)
	}
}

// TestThroughPgBouncer: a store opens, migrates and serves through
// PgBouncer in session mode, as docs/scale-out.md says it does, with its
// session settings: PgBouncer refuses a startup parameter it does not
// track, so they are set on the connection, not sent at its start.
func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	url := pgtest.Bouncer(t, pgtest.Database(t))
	ctx := context.Background()
	s, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatalf("open through PgBouncer: %v", err)
	}
	defer s.Close()
	var workers string
	if err := s.Pool().QueryRow(ctx, `SHOW max_parallel_workers_per_gather`).Scan(&workers); err != nil || workers != noParallel {
		t.Errorf("max_parallel_workers_per_gather through PgBouncer = %q, %v; want %s", workers, err, noParallel)
	}
	if _, err := s.Stats(ctx, nil, nil); err != nil {
		t.Errorf("stats through PgBouncer: %v", err)
	}
	ro, err := Open(ctx, url, Options{NoMigrate: true})
	if err != nil {
		t.Fatalf("an operator's open through PgBouncer: %v", err)
	}
	ro.Close()
}

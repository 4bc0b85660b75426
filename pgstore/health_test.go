package pgstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// dbName is the database name in a pgtest URL.
func dbName(url string) string { return url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")] }

// TestHealthFollowsWrites: Healthy is the last write's outcome and Ping a
// real write: with the database refusing connections both fail (the
// receiver's 503 and /readyz), and both recover when it accepts them again,
// without reopening the store.
func TestHealthFollowsWrites(t *testing.T) {
	c := pgtest.Start(t)
	url := c.NewDatabase(t)
	db := dbName(url)
	s := open(t, url, Options{Timeout: 5 * time.Second})
	ctx := context.Background()
	if err := s.Healthy(); err != nil {
		t.Fatalf("healthy after open: %v", err)
	}
	if _, err := s.Record(ctx, receipt("std", "e1", `{}`, "std/app")); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if err := s.Healthy(); err != nil {
		t.Fatalf("healthy after a write: %v", err)
	}

	// No new connection to the database, and the store's own cut off.
	for _, q := range []string{`ALTER DATABASE ` + db + ` ALLOW_CONNECTIONS false`,
		`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '` + db + `'`} {
		if err := c.Exec(ctx, "", q); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Ping(ctx); !errors.Is(err, hookwarden.ErrUnavailable) {
		t.Fatalf("ping with no connection possible: %v, want ErrUnavailable", err)
	}
	if err := s.Healthy(); err == nil {
		t.Fatal("healthy after a failed write")
	}
	if _, err := s.Record(ctx, receipt("std", "e2", `{}`, "std/app")); !errors.Is(err, hookwarden.ErrUnavailable) {
		t.Fatalf("record with no connection possible: %v, want ErrUnavailable", err)
	}

	if err := c.Exec(ctx, "", `ALTER DATABASE `+db+` ALLOW_CONNECTIONS true`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.Ping(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("ping never recovered: %v", s.Ping(ctx))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := s.Healthy(); err != nil {
		t.Fatalf("healthy after the database came back: %v", err)
	}
}

// TestHealthIgnoresReads: a failed read is not a failed write.
func TestHealthIgnoresReads(t *testing.T) {
	s := open(t, pgtest.Database(t), Options{})
	if _, err := s.Pool().Exec(context.Background(), `SELECT * FROM no_such_table`); err == nil {
		t.Fatal("the bad read succeeded")
	}
	if err := s.Healthy(); err != nil {
		t.Fatalf("healthy after a failed read: %v", err)
	}
	if _, err := s.Pool().Exec(context.Background(), `UPDATE no_such_table SET x = 1`); err == nil {
		t.Fatal("the bad write succeeded")
	}
	if err := s.Healthy(); err == nil {
		t.Fatal("healthy after a failed write")
	}
}

func TestIsWrite(t *testing.T) {
	for sql, want := range map[string]bool{
		"INSERT INTO x VALUES (1)": true, "\n\tupdate jobs SET": true, "commit": true, "DELETE FROM x": true,
		"WITH a AS (UPDATE x SET y=1 RETURNING *) SELECT * FROM a": true, "SELECT 1": false, "begin": false,
		"": false, "rollback": false, "(SELECT 1)": false,
	} {
		if got := isWrite(sql); got != want {
			t.Errorf("isWrite(%q) = %v, want %v", sql, got, want)
		}
	}
}

// TestInstancesUp counts runs with a fresh heartbeat and no stop.
func TestInstancesUp(t *testing.T) {
	url := pgtest.Database(t)
	ctx := context.Background()
	a := open(t, url, Options{Instance: "a"})
	b := open(t, url, Options{Instance: "b"})
	ra, err := a.StartRun(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.StartRun(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := a.InstancesUp(ctx, time.Minute); err != nil || n != 2 {
		t.Fatalf("instances up: %d %v, want 2", n, err)
	}
	if err := b.StopRun(ctx, rb); err != nil {
		t.Fatal(err)
	}
	// a's heartbeat is older than a stale limit of a moment ago.
	if _, err := a.Pool().Exec(ctx, `UPDATE runs SET heartbeat_at = now() - interval '1 hour' WHERE id = $1`, ra); err != nil {
		t.Fatal(err)
	}
	if n, err := a.InstancesUp(ctx, time.Minute); err != nil || n != 0 {
		t.Fatalf("instances up after a stop and a stale heartbeat: %d %v, want 0", n, err)
	}
	if err := a.Heartbeat(ctx, ra); err != nil {
		t.Fatal(err)
	}
	if n, err := a.InstancesUp(ctx, time.Minute); err != nil || n != 1 {
		t.Fatalf("instances up after a heartbeat: %d %v, want 1", n, err)
	}
}

// TestBackupRefused: Backup says what to use instead and writes nothing.
func TestBackupRefused(t *testing.T) {
	s := open(t, pgtest.Database(t), Options{})
	dest := t.TempDir() + "/b.db"
	err := s.Backup(context.Background(), dest, nil)
	if !errors.Is(err, hookwarden.ErrNotSupported) || !strings.Contains(err.Error(), "pg_dump") ||
		!strings.Contains(err.Error(), "hookwarden export") {
		t.Fatalf("backup: %v, want ErrNotSupported naming pg_dump and export", err)
	}
}

// TestCheck: Check reports what Open would refuse, and changes nothing.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	if v, err := Check(ctx, url, 5*time.Second); err != nil || v != 0 {
		t.Fatalf("check of an empty database: %d %v, want version 0", v, err)
	}
	s := open(t, url, Options{})
	if v, err := Check(ctx, url, 5*time.Second); err != nil || v != SchemaVersion() {
		t.Fatalf("check after open: %d %v, want %d", v, err, SchemaVersion())
	}
	var ce *ConnectError
	missing := strings.Replace(url, "/"+dbName(url)+"?", "/nosuchdb?", 1)
	if _, err := Check(ctx, missing, 5*time.Second); !errors.As(err, &ce) || !ce.Refused || !strings.Contains(err.Error(), "no such database") {
		t.Fatalf("check of a missing database: %v, want a refusal naming it", err)
	}
	if _, err := Check(ctx, "postgres://u:secret@127.0.0.1:1/x?sslmode=disable", 5*time.Second); !errors.As(err, &ce) ||
		ce.Refused || strings.Contains(err.Error(), "secret") {
		t.Fatalf("check of an unreachable server: %v, want unreachable without the password", err)
	}
	if _, err := s.Pool().Exec(ctx, `ALTER DATABASE `+dbName(url)+` SET synchronous_commit = off`); err != nil {
		t.Fatal(err)
	}
	var se *SettingError
	if _, err := Check(ctx, url, 5*time.Second); !errors.As(err, &se) || se.Setting != "synchronous_commit" {
		t.Fatalf("check with synchronous_commit=off: %v, want a SettingError", err)
	}
	if _, err := s.Pool().Exec(ctx, `ALTER DATABASE `+dbName(url)+` RESET synchronous_commit`); err != nil {
		t.Fatal(err)
	}
	// A role that may not read the version gets an error, not version 0:
	// an empty database, which serve would set about creating.
	role := "noread_" + dbName(url)
	if _, err := s.Pool().Exec(ctx, `CREATE ROLE `+role+` LOGIN`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = s.Pool().Exec(context.Background(), `DROP ROLE `+role) })
	noread := strings.Replace(url, "postgres://postgres@", "postgres://"+role+"@", 1)
	if v, err := Check(ctx, noread, 5*time.Second); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("check by a role that may not read schema_version: %d %v, want permission denied", v, err)
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(ctx, url, 5*time.Second); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("check of a newer schema: %v, want ErrNewerSchema", err)
	}
}

// TestNoMigrate: an operator's open changes no schema.
func TestNoMigrate(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	if _, err := Open(ctx, url, Options{NoMigrate: true}); !errors.Is(err, ErrOlderSchema) {
		t.Fatalf("open of an empty database without migrating: %v, want ErrOlderSchema", err)
	}
	if v, err := Check(ctx, url, 5*time.Second); err != nil || v != 0 {
		t.Fatalf("after the refused open: version %d %v, want 0 (nothing created)", v, err)
	}
	s := open(t, url, Options{})
	open(t, url, Options{NoMigrate: true})
	// An operator's open does not wait behind a migration under way (here
	// its lock, held by another session).
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx) // its session's lock with it
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLock); err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		ro, err := Open(ctx, url, Options{NoMigrate: true})
		if err == nil {
			ro.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatalf("open without migrating while the migration lock is held: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("open without migrating waits behind the migration lock")
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, migrateLock); err != nil {
		t.Fatal(err)
	}
	// A schema one version behind (a migration not applied yet) is refused too.
	if _, err := s.Pool().Exec(ctx, `UPDATE schema_version SET version = version - 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, url, Options{NoMigrate: true}); !errors.Is(err, ErrOlderSchema) {
		t.Fatalf("open of a schema one version behind without migrating: %v, want ErrOlderSchema", err)
	}
}

// TestOnCommit: every COMMIT is reported with its outcome.
func TestOnCommit(t *testing.T) {
	var mu sync.Mutex
	var n, failed int
	s := open(t, pgtest.Database(t), Options{OnCommit: func(batch int, d time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if batch != 1 || d <= 0 {
			t.Errorf("commit reported as batch %d, %v", batch, d)
		}
		n++
		if err != nil {
			failed++
		}
	}})
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.Record(ctx, receipt("std", fmt.Sprintf("c%d", i), `{}`, "std/app")); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n < 3 || failed != 0 {
		t.Fatalf("%d commits reported (%d failed), want at least the 3 records' and none failed", n, failed)
	}
}

// TestCheckCredentials: a password the server refuses is reported as
// refused credentials, without the password.
func TestCheckCredentials(t *testing.T) {
	c := pgtest.Start(t)
	ctx := context.Background()
	if err := c.Exec(ctx, "", `CREATE ROLE checker LOGIN PASSWORD 'right-one'`); err != nil {
		t.Fatal(err)
	}
	hba := filepath.Join(c.Dir, "data", "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, append([]byte("local all checker scram-sha-256\n"), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "", `SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(c.URL(""), "postgres://postgres@", "postgres://checker:wrong-one@", 1)
	var ce *ConnectError
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = Check(ctx, url, 5*time.Second)
		if errors.As(err, &ce) && ce.Refused || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the reload is asynchronous
	}
	if !errors.As(err, &ce) || !ce.Refused || !strings.Contains(err.Error(), "credentials were refused") ||
		strings.Contains(err.Error(), "wrong-one") {
		t.Fatalf("check with a wrong password: %v, want refused credentials without the password", err)
	}
	right := strings.Replace(url, "wrong-one", "right-one", 1)
	if _, err := Check(ctx, right, 5*time.Second); err != nil {
		t.Fatalf("check with the right password: %v", err)
	}
}

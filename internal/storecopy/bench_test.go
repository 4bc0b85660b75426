package storecopy

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
	"github.com/hookwarden/hookwarden/pgstore"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// benchEvents is the size of the store the copy benchmarks move: each
// event has one receipt (a 1 KiB body) and one job.
const benchEvents = 20000

// benchStore records benchEvents events into a new SQLite store, 64 at a
// time (the writer groups them as it does under load).
func benchStore(b *testing.B) *sqlitestore.Store {
	b.Helper()
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "hw.db"), sqlitestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	body := make([]byte, 1024)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	var wg sync.WaitGroup
	ids := make(chan int)
	for range 64 {
		wg.Go(func() {
			for i := range ids {
				b := append([]byte(fmt.Sprintf(`{"id":"evt_%d",`, i)), body...)
				sum := sha256.Sum256(b)
				id := fmt.Sprintf("evt_%d", i)
				_, err := s.Record(ctx, &hookwarden.Receipt{Source: "std", Header: http.Header{"Webhook-Id": {id}},
					Body: b, BodySHA256: sum, RemoteAddr: "127.0.0.1:1", ReceivedAt: time.Now(),
					Events: []hookwarden.Event{{ID: id, Type: "t", BodySHA256: sum, Destinations: []string{"std/app"}}}})
				if err != nil {
					panic(err)
				}
			}
		})
	}
	for i := range benchEvents {
		ids <- i
	}
	close(ids)
	wg.Wait()
	return s
}

// BenchmarkCopySQLiteToPostgres is migrate-store's copy: every table of an
// SQLite store into an empty PostgreSQL database, in one transaction.
func BenchmarkCopySQLiteToPostgres(b *testing.B) {
	src := benchStore(b)
	c := pgtest.Start(b)
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		dst, err := pgstore.Open(ctx, c.NewDatabase(b), pgstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		stx, err := src.DB().BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		err = pgx.BeginFunc(ctx, dst.Pool(), func(tx pgx.Tx) error {
			_, err := Copy(ctx, SQLiteSource(stx), PostgresDestination(tx), Options{Skip: []string{"store_marks"},
				Fill: map[string]map[string]any{"runs": {"instance": "bench"}}})
			return err
		})
		stx.Rollback()
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		dst.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(benchEvents)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkExportSQLite is export's copy: every table of an SQLite store
// into a new SQLite file, through the new file's writer.
func BenchmarkExportSQLite(b *testing.B) {
	src := benchStore(b)
	ctx := context.Background()
	for b.Loop() {
		dst, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "export.db"), sqlitestore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		stx, err := src.DB().BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		err = dst.Bulk(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := Copy(ctx, SQLiteSource(stx), SQLiteDestination(tx), Options{Skip: []string{"store_marks"}})
			return err
		})
		stx.Rollback()
		dst.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchEvents)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

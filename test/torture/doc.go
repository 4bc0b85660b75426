// Package torture proves the promises of the README against the real
// binary. Its tests build ./cmd/hookwarden once, run `hookwarden serve` as a
// child process with a loopback destination app that records every delivery,
// drive it with a signed sender that behaves like a provider (it retries every
// failed send as a new delivery attempt with the same event id), and inject
// faults: kill -9, a power-loss model on a loop-mounted ext4 image, a full
// disk on a small tmpfs, a destination outage, concurrent doubles and bulk
// redrives, hostile clients, and a long burst for leaks.
//
// Every scenario runs on both stores: its Test function runs one body as the
// subtests sqlite and postgres (store_test.go: forEachStore, and testDB,
// through which a body reads claims, counts, the attempt log, the WAL's size
// and an integrity check from either store). On PostgreSQL each scenario
// starts a throwaway cluster of its own (internal/pgtest: skipped without
// PostgreSQL's binaries unless CI is set); the disk scenarios put its data
// directory on the tmpfs or the loop-mounted image, and the power cut freezes
// and kills its processes along with serve. scale.on sizes what PostgreSQL
// does more slowly. postgres_test.go has what only PostgreSQL has: kill -9 of
// one of two serve processes on one database, the load failing over.
//
// What a passing run guarantees, per scenario: every event that ever got a 2xx
// was delivered (lost = 0); no delivery for an event never sent; every
// delivery carried the same Idempotency-Key; duplicates of an id never created
// a second job; the process's goroutines and file descriptors came back to
// their baseline. Figures (duplicate deliveries, p99 ratios, RSS) are reported
// in one summary table; docs/reliability.md explains each scenario and keeps
// the latest long-form table.
//
// The short forms run by default (`make torture-short`; on both stores about nine minutes on a loaded 2-core machine);
// the long forms run with -torture.long or HOOKWARDEN_TORTURE=long
// (`make torture`). Mount-based scenarios need root and skip without it.
// Under -race every test skips: timings mean nothing there, and the CI runs
// this package in its own step without the race detector.
package torture

package torture

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"go.uber.org/goleak"
)

var (
	flagLong  = flag.Bool("torture.long", false, "run the long forms (same as HOOKWARDEN_TORTURE=long)")
	flagTable = flag.String("torture.table", "", "also write the summary table to this file, absolute path (same as HOOKWARDEN_TORTURE_TABLE)")
)

// raceEnabled is set by race_test.go under -race.
var raceEnabled bool

// binPath is the hookwarden binary built once by TestMain.
var binPath string

func TestMain(m *testing.M) {
	flag.Parse()
	if raceEnabled {
		// Every test skips (see setup); nothing to build.
		goleak.VerifyTestMain(m)
		return
	}
	dir, err := os.MkdirTemp("", "hookwarden-torture-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "torture:", err)
		os.Exit(1)
	}
	if binPath = os.Getenv("HOOKWARDEN_TORTURE_BIN"); binPath != "" {
		// Torture a given binary (a release build) instead of this tree.
		fmt.Fprintln(os.Stderr, "torture: using", binPath)
	} else {
		binPath = filepath.Join(dir, "hookwarden")
		build := exec.Command("go", "build", "-trimpath", "-o", binPath, "github.com/hookwarden/hookwarden/cmd/hookwarden")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "torture: build hookwarden: %v\n%s", err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		writeTable()
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// scale holds every size and duration a scenario is parameterised by.
type scale struct {
	name string // "short" or "long"

	kills      int           // kill -9 moments
	killWindow time.Duration // over this much load
	killBurst  time.Duration // senders go flat out for this long before each kill and power cut

	powerCuts int

	diskCycles int    // fill / free cycles
	diskSize   string // tmpfs size

	smallDiskFor  time.Duration // sustained load on a small disk
	smallDiskSize string        // its tmpfs size

	outagePhase time.Duration // each of refused, 503, slow

	redrive int // already-processed events resent

	hostileBase   time.Duration // legit sender alone
	hostileAttack time.Duration // legit sender under attack
	slowloris     int           // connections dribbling headers
	endless       int           // connections with a body that never ends
	badSigs       int           // requests with bad signatures
	oversized     int           // oversized bodies (half with Content-Length, half chunked)

	burst int // events of the leak burst
}

var shortScale = scale{
	name:          "short",
	kills:         3,
	killWindow:    20 * time.Second,
	killBurst:     time.Second,
	powerCuts:     3,
	diskCycles:    1,
	diskSize:      "24m",
	smallDiskFor:  20 * time.Second,
	smallDiskSize: "24m",
	outagePhase:   3 * time.Second,
	redrive:       4000,
	hostileBase:   5 * time.Second,
	hostileAttack: 8 * time.Second,
	slowloris:     200,
	endless:       50,
	badSigs:       10000,
	oversized:     200,
	burst:         10000,
}

var longScale = scale{
	name:          "long",
	kills:         100,
	killWindow:    150 * time.Second,
	killBurst:     250 * time.Millisecond,
	powerCuts:     25,
	diskCycles:    5,
	diskSize:      "64m",
	smallDiskFor:  60 * time.Second,
	smallDiskSize: "64m",
	outagePhase:   20 * time.Second,
	redrive:       40000,
	hostileBase:   15 * time.Second,
	hostileAttack: 40 * time.Second,
	slowloris:     1000,
	endless:       200,
	badSigs:       10000,
	oversized:     2000,
	burst:         100000,
}

// on is the scale of a scenario on store k. On PostgreSQL the disks are
// larger (initdb's files and the first WAL segments take about 60 MiB), and
// the burst, the redrive and the kill window smaller: here it acknowledges
// and delivers several times slower than SQLite (docs/reliability.md), and
// the short forms must stay short.
func (sc scale) on(k storeKind) scale {
	if k != onPostgres {
		return sc
	}
	sc.diskSize = "160m"
	if sc.name == "short" {
		sc.smallDiskSize = "160m"
		sc.killWindow = 10 * time.Second
		sc.redrive = 1000
		sc.burst = 1000
	} else {
		sc.smallDiskSize = "256m"
		sc.redrive = 20000
		sc.burst = 30000
	}
	return sc
}

func isLong() bool {
	return *flagLong || strings.EqualFold(os.Getenv("HOOKWARDEN_TORTURE"), "long")
}

// setup returns the scale of this run, or skips the test under -race.
func setup(t *testing.T) scale {
	t.Helper()
	if raceEnabled {
		t.Skip("torture: skipped under -race (timings mean nothing there); `make torture-short` runs it, .ci/run does so in its own step")
	}
	if isLong() {
		return longScale
	}
	return shortScale
}

// deadline returns a context that ends after d or with the test: every send
// loop is bounded in time, so a wedged server fails the test instead of
// hanging it.
func deadline(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// row is one line of the summary table.
type row struct {
	Scenario string
	Events   int // distinct event ids sent
	Acked    int // of which got a 2xx
	Lost     int // acknowledged but never delivered
	Dups     int // deliveries beyond the first per event id
	Faults   int // faults injected (meaning per scenario, see Figures)
	Figures  string
	result   string
	took     time.Duration
}

var (
	rowsMu sync.Mutex
	rows   []*row
)

// newRow registers a row for the scenario; its result is decided when the
// test ends (pass, FAIL or skip).
func newRow(t *testing.T, scenario string) *row {
	r := &row{Scenario: scenario}
	start := time.Now()
	t.Cleanup(func() {
		r.took = time.Since(start).Round(100 * time.Millisecond)
		switch {
		case t.Failed():
			r.result = "FAIL"
		case t.Skipped():
			r.result = "skip"
		default:
			r.result = "pass"
		}
		rowsMu.Lock()
		rows = append(rows, r)
		rowsMu.Unlock()
		t.Logf("%s: events=%d acknowledged=%d lost=%d duplicate_deliveries=%d faults=%d result=%s (%s) %s",
			r.Scenario, r.Events, r.Acked, r.Lost, r.Dups, r.Faults, r.result, r.took, r.Figures)
	})
	return r
}

// track fills the row's event counts from p if the test ends before its
// checks did (a t.Fatal).
func (r *row) track(t *testing.T, p *provider) {
	t.Cleanup(func() {
		if r.Events == 0 {
			r.Events, r.Acked = p.counts()
		}
	})
}

func (r *row) figure(format string, args ...any) {
	if r.Figures != "" {
		r.Figures += "; "
	}
	r.Figures += fmt.Sprintf(format, args...)
}

// writeTable prints the summary table to stdout and, if asked, to a file.
func writeTable() {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	if len(rows) == 0 {
		return
	}
	form := "short"
	if isLong() {
		form = "long"
	}
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "hookwarden torture, %s form, %s, %s/%s, %d CPUs, host %s\n\n",
		form, time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), host)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tevents\tacknowledged\tlost\tduplicate deliveries\tfaults injected\tresult\ttime\tfigures")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n",
			r.Scenario, r.Events, r.Acked, r.Lost, r.Dups, r.Faults, r.result, r.took, r.Figures)
	}
	tw.Flush()
	out := b.String()
	fmt.Print("\n" + out)
	path := *flagTable
	if path == "" {
		path = os.Getenv("HOOKWARDEN_TORTURE_TABLE")
	}
	if path != "" {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "torture: write table:", err)
		}
	}
}

// logTail returns the last n lines of a file, for failure messages.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	st, _ := f.Stat()
	const max = 64 << 10
	if st != nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

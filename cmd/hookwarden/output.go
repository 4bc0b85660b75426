package main

// Shared plumbing of the operator commands: opening the database with or
// without a configuration, tables, JSON lines, times, progress.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/hookwarden/hookwarden"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/hookwarden/hookwarden/internal/config"
)

// optionalConfig is the configuration for commands that need at most the
// database path and the sources' metadata (horizons, names). With --db and
// neither --config nor $HOOKWARDEN_CONFIG it is nil: offline forensics on a
// copied file needs no configuration. Problems that only matter to serve
// (a secret not resolvable in this shell) are ignored: `check` reports them.
func (g *globals) optionalConfig() (*config.Config, error) {
	if g.dbPath != "" && g.configPath == "" && os.Getenv("HOOKWARDEN_CONFIG") == "" {
		return nil, nil
	}
	path, err := findConfig(g.configPath)
	if err != nil {
		return nil, err
	}
	cfg, _, err := loadConfigFile(path)
	if err != nil {
		return nil, err
	}
	g.applyDB(cfg)
	return cfg, nil
}

// openStore opens the database of --db or the configuration. readOnly opens
// it with no writer and no migration (mode=ro): the file is never changed.
func (g *globals) openStore(ctx context.Context, readOnly bool) (hookwarden.Store, *config.Config, error) {
	cfg, err := g.optionalConfig()
	if err != nil {
		return nil, nil, err
	}
	path := g.dbPath
	if cfg != nil {
		path = cfg.Database.Path
	}
	if !readOnly && (cfg == nil || !cfg.Database.Postgres()) {
		// A write command (replay, prune) must not create an empty database
		// from a mistyped path.
		if _, err := os.Stat(path); err != nil {
			return nil, nil, noDatabase(path, err)
		}
	}
	log := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if cfg != nil && cfg.Database.Postgres() {
		s, err := openStoreURL(ctx, cfg.Database, log)
		if err != nil {
			return nil, nil, err
		}
		return s, cfg, nil
	}
	s, err := openStoreFile(ctx, path, readOnly, log)
	if err != nil {
		return nil, nil, noDatabase(path, err)
	}
	// A forensic file says what it is (an export, partial or not; a moved
	// database), on stderr so that --json stays clean.
	for _, m := range exportMarks(ctx, s) {
		fmt.Fprintln(g.stderr, "hookwarden: note:", m)
	}
	return s, cfg, nil
}

func sourceNames(cfg *config.Config) []string {
	if cfg == nil {
		return nil
	}
	var names []string
	for _, s := range cfg.Sources {
		names = append(names, s.Name)
	}
	return names
}

// sinceFlag turns a --since DURATION ("90m", "7d") into a point in time.
func sinceFlag(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	d, err := config.ParseDuration(s)
	if err != nil {
		return time.Time{}, usageErrorf("--since: %v", err)
	}
	return now.Add(-d.D()), nil
}

// writeJSONLine writes v as one line of JSON, exact: straight to the raw
// writer (not through the text escaping of safetext.go). encoding/json
// escapes C0 controls; DEL, C1 controls and bidi overrides are escaped here
// too (\u009b), which decodes to the same string, so a terminal never sees
// them raw.
func writeJSONLine(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := rawWriter(w).Write(jsonEscapeControls(b.Bytes()))
	return err
}

// jsonEscapeControls rewrites DEL and C1 characters of encoded JSON as
// \u escapes. They can only occur inside strings, where the escape means
// the same character.
func jsonEscapeControls(b []byte) []byte {
	if !bytes.ContainsFunc(b, func(r rune) bool { return r == 0x7f || unsafeRune(r) }) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == 0x7f || unsafeRune(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// fmtUTC prints a time in UTC, to the second; "-" for none.
func fmtUTC(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// localIsUTC: the machine's zone is UTC (TZ=UTC, most servers), so a
// local time beside a UTC one would print the same time twice.
// It asks for no offset in January and July, so that London in winter
// still gets its local column.
func localIsUTC() bool {
	y := time.Now().Year()
	for _, m := range []time.Month{time.January, time.July} {
		if _, off := time.Date(y, m, 1, 12, 0, 0, 0, localZone()).Zone(); off != 0 {
			return false
		}
	}
	return true
}

// fmtLocal prints a time in the machine's zone, for the human reading it.
func fmtLocal(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.In(localZone()).Format("2006-01-02 15:04:05 MST")
}

// outputZone, when set (tests), replaces the machine's zone in what the
// CLI prints: time.Local is the runtime's, read by every goroutine.
var outputZone *time.Location

func localZone() *time.Location {
	if outputZone != nil {
		return outputZone
	}
	return time.Local
}

// fmtDur prints a duration the way an operator reads it: 850ms, 12.3s, 4m05s, 3h12m, 2d4h.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// oneLine shortens s to n runes on one line, for table cells.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func fmtBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// progress shows how far a long operation is: a redrawn bar on a terminal,
// a plain line every tenth of the way otherwise (logs, pipes, CI).
type progress struct {
	w     io.Writer
	label string
	tty   bool
	last  time.Time
	step  int // last tenth printed (plain mode)
	drawn bool
}

func newProgress(w io.Writer, label string) *progress {
	// The bar's own text is safe, and its \r must reach the terminal.
	p := &progress{w: rawWriter(w), label: label, step: -1}
	if f, ok := osFile(w); ok && isTerminal(f) {
		p.tty = true
	}
	return p
}

// update reports done of total units; unit names them ("jobs", or "" for bytes).
func (p *progress) update(done, total int64, unit string) {
	if total <= 0 {
		return
	}
	done = min(done, total)
	count := fmt.Sprintf("%d/%d %s", done, total, unit)
	if unit == "" {
		count = fmtBytes(done) + " / " + fmtBytes(total)
	}
	if p.tty {
		if done < total && time.Since(p.last) < 100*time.Millisecond {
			return
		}
		p.last = time.Now()
		const width = 30
		fill := int(int64(width) * done / total)
		bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
		if fill > 0 && fill < width {
			bar = strings.Repeat("=", fill-1) + ">" + strings.Repeat(" ", width-fill)
		}
		fmt.Fprintf(p.w, "\r%s [%s] %3d%% %s", p.label, bar, 100*done/total, count)
		p.drawn = true
		if done == total {
			fmt.Fprintln(p.w)
			p.drawn = false
		}
		return
	}
	tenth := int(10 * done / total)
	if tenth == p.step {
		return
	}
	p.step = tenth
	fmt.Fprintf(p.w, "%s: %s (%d%%)\n", p.label, count, 100*done/total)
}

// finish ends a bar that did not reach 100% (an error midway).
func (p *progress) finish() {
	if p.tty && p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// writePage prints one page of a listing (events, dead letters, held
// requests): JSON lines with --json, else the text table; then, on stderr,
// how to ask for the next page.
func writePage[T any](g *globals, items []T, next int64, limit int, asJSON bool, table func(io.Writer, []T)) error {
	if asJSON {
		for _, it := range items {
			if err := writeJSONLine(g.stdout, it); err != nil {
				return err
			}
		}
	} else {
		table(g.stdout, items)
	}
	if next != 0 {
		fmt.Fprintf(g.stderr, "more: add --before %d for the next %d\n", next, limit)
	}
	return nil
}

// noDatabase is err, with the fix when the file is not there: a command
// run before the first serve, or with a configuration whose database.path
// is not the one serve uses (the packaged unit's).
func noDatabase(path string, err error) error {
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fmt.Errorf("open database: no database at %s: serve creates it at its first start; "+
		"if serve runs with another one (the packaged unit's is /var/lib/hookwarden/hookwarden.db), "+
		"set database.path to it or give --db FILE", path)
}

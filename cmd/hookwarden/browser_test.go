package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hookwarden/hookwarden/sqlitestore"
)

// findChromium returns the headless browser to drive. On a developer's
// machine without one the browser test is skipped; under CI (CI set, as
// .ci/run runs) a missing browser is a failure: .ci/run installs Debian's
// chromium.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HOOKWARDEN_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH: .ci/run installs it (apt-get install -y chromium)")
	}
	t.Skip("no chromium on PATH (apt-get install -y chromium); CI runs this test")
	return ""
}

// artifactDir is where screenshots go: $HOOKWARDEN_ARTIFACTS, else
// .artifacts/ at the repository root (ignored by git; CI keeps it).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("HOOKWARDEN_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", ".artifacts")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDashboardInBrowser drives the dashboard in headless Chromium on a
// phone-sized screen, as an operator would: log in with the token, see the
// source's chart with the outage before this run shaded, see the dead
// letter, press Replay, and see the list empty once the event is
// delivered. Screenshots of both states are saved under .artifacts/.
func TestDashboardInBrowser(t *testing.T) {
	chromium := findChromium(t)
	const token = "adm-browser-7Hq2Wv9Kx4Ld8Rs3"
	app := newSink(t, 422) // the app refuses the first delivery, then takes it
	db := filepath.Join(t.TempDir(), "hw.db")
	crashedRun(t, db, time.Now().Add(-3*time.Hour), time.Now().Add(-2*time.Hour))
	a := startAppYAML(t, fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0", token: %q }
database: { path: %q }
retention: { claims: 90d }
sources:
  - name: stripe
    scheme: standard
    secrets: [%q]
    expect_within: 6h
    destinations:
      - name: app
        url: %q
        backoff: { initial: 10ms, max: 40ms }
`, token, db, testSecret, app.URL), db)
	hook := "http://" + a.HookAddr() + "/hooks/stripe"
	do(t, signed(t, hook, "evt_1PoisonPill", []byte(`{"type":"invoice.payment_failed"}`), time.Now(), testSecret))
	eventually(t, "dead letter", func() bool { return a.count(`SELECT count(*) FROM jobs WHERE state = 'dead'`) == 1 })
	// Some ordinary traffic, so the counts are not all zero.
	for i := range 3 {
		do(t, signed(t, hook, fmt.Sprintf("evt_ok_%d", i), []byte(`{"type":"invoice.paid"}`), time.Now(), testSecret))
	}
	do(t, signed(t, hook, "evt_ok_0", []byte(`{"type":"invoice.paid"}`), time.Now(), testSecret))
	eventually(t, "ordinary events delivered", func() bool {
		return a.count(`SELECT count(*) FROM jobs WHERE state = 'delivered'`) == 3
	})

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	defer cancelAlloc() // kills the browser and waits for it
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()

	base := "http://" + a.AdminAddr()
	err := chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(base+"/"),
		// No cookie yet: the dashboard sends the browser to the login form.
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.CSS("#dead li.card form button")),
	)
	if err != nil {
		t.Fatalf("log in and open the dashboard: %v", err)
	}
	// The chart: drawn, with this hour's bars and the outage shaded.
	chart, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`(() => {
		const svg = document.querySelector("#sources svg.chart");
		if (!svg) return [0, 0, 0];
		const box = svg.getBoundingClientRect();
		return [Math.round(box.width), svg.querySelectorAll("rect.acc").length, svg.querySelectorAll("rect.outage").length];
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if len(chart) != 3 || chart[0] < 200 || chart[1] < 1 || chart[2] != 1 {
		t.Errorf("chart [width, accepted bars, outage windows] = %v, want drawn across the card, with bars and one outage", chart)
	}
	outage, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#sources svg.chart rect.outage title").textContent`))
	if err != nil || !strings.Contains(outage, "Hookwarden down") || !strings.Contains(outage, "2h") {
		t.Errorf("the outage's title is %q (%v), want the 2 h window", outage, err)
	}
	dead, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#dead")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"evt_1PoisonPill", "stripe/app", "HTTP 422", "Replay"} {
		if !strings.Contains(dead, want) {
			t.Errorf("dead-letter section lacks %q:\n%s", want, dead)
		}
	}
	dir := artifactDir(t)
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("dashboard screenshot: %s", path)
	}
	shot("dashboard-dead-letter.png")

	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS("#dead li.card form button")),
		chromedp.WaitVisible(chromedp.CSS(".flash.ok")),
	); err != nil {
		t.Fatalf("press Replay: %v", err)
	}
	flash, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".flash.ok")))
	if err != nil || !strings.Contains(flash, "Replayed 1 job") {
		t.Errorf("after Replay the page says %q (%v)", flash, err)
	}
	// The worker delivers within a moment; reload until the list is empty.
	deadline := time.Now().Add(20 * time.Second)
	for {
		empty, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("no-dead") !== null`))
		if err != nil {
			t.Fatal(err)
		}
		if empty {
			break
		}
		if time.Now().After(deadline) {
			shot("dashboard-failed.png")
			t.Fatal("the dead-letter list is not empty 20s after Replay")
		}
		time.Sleep(200 * time.Millisecond)
		if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.count(`SELECT count(*) FROM jobs WHERE state = 'delivered'`); n != 4 {
		t.Errorf("delivered jobs: %d, want 4 (the replayed one included)", n)
	}
	shot("dashboard.png")
}

// crashedRun records in a new file at db a serve run that started at start
// and last beat at last, and never stopped: the next serve finds the
// outage window from last to its own start.
func crashedRun(t *testing.T, db string, start, last time.Time) {
	t.Helper()
	ctx := context.Background()
	at := start
	st, err := sqlitestore.Open(ctx, db, sqlitestore.Options{Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	run, err := st.StartRun(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	at = last
	if err := st.Heartbeat(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

package admin

// The dashboard's chart: per source, accepted events and duplicates per
// hour over the last 7 days, drawn on the server as inline SVG (no script,
// so the Content-Security-Policy stays as it is), with the outage windows
// and the source's silences shaded behind the bars, so a gap is seen at a
// glance rather than read from a table.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden"
)

// ChartHours is how many hours the chart spans (7 days).
const ChartHours = 7 * 24

// Chart geometry, in SVG user units: each hour is slot wide, its accepted
// bar first and its duplicates bar beside it.
const (
	chartSlot  = 2
	chartPlotH = 48
	chartH     = 62 // the plot and a row of day labels
)

// dashChart is one source's chart as the template draws it. Coordinates are
// preformatted numbers.
type dashChart struct {
	W, H, PlotH int
	Label       string // what a screen reader says of it
	Bars        []chartRect
	Shades      []chartRect
	Ticks       []chartTick
	Max         int
}

type chartRect struct {
	Class      string // acc, dup; outage, "outage recovered", silence
	X, Y, W, H string
	Title      string
}

type chartTick struct {
	X, LabelX string
	Label     string
}

func chartNum(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }

// buildChart lays out source's hours ending with the hour of now. Outages
// (every one: the whole program was down) and the source's own silences
// are shaded where they overlap the span.
func buildChart(source string, hours []hookwarden.HourCount, gaps hookwarden.GapReport, now time.Time) dashChart {
	end := now.UTC().Truncate(time.Hour).Add(time.Hour)
	start := end.Add(-ChartHours * time.Hour)
	c := dashChart{W: ChartHours * chartSlot, H: chartH, PlotH: chartPlotH}
	x := func(t time.Time) float64 {
		return min(max(t.Sub(start).Hours()*chartSlot, 0), float64(c.W))
	}
	var acc, dup int
	for _, h := range hours {
		if h.Hour.Before(start) || !h.Hour.Before(end) {
			continue
		}
		c.Max = max(c.Max, h.Accepted, h.Duplicates)
		acc, dup = acc+h.Accepted, dup+h.Duplicates
	}
	scale := func(n int) float64 {
		if c.Max == 0 || n == 0 {
			return 0
		}
		return max(float64(n)/float64(c.Max)*chartPlotH, 1) // a lone event stays visible
	}
	for _, h := range hours {
		if h.Hour.Before(start) || !h.Hour.Before(end) {
			continue
		}
		at := x(h.Hour)
		when := h.Hour.Format("Jan 2 15:00")
		if n := h.Accepted; n > 0 {
			ht := scale(n)
			c.Bars = append(c.Bars, chartRect{Class: "acc", X: chartNum(at + 0.2), Y: chartNum(chartPlotH - ht), W: "1.0", H: chartNum(ht),
				Title: fmt.Sprintf("%s UTC: %d accepted", when, n)})
		}
		if n := h.Duplicates; n > 0 {
			ht := scale(n)
			c.Bars = append(c.Bars, chartRect{Class: "dup", X: chartNum(at + 1.2), Y: chartNum(chartPlotH - ht), W: "0.6", H: chartNum(ht),
				Title: fmt.Sprintf("%s UTC: %d duplicates", when, n)})
		}
	}
	shade := func(class string, from, to time.Time, title string) {
		if to.IsZero() {
			to = now
		}
		if !to.After(start) || !from.Before(end) {
			return
		}
		x0, x1 := x(from), x(to)
		c.Shades = append(c.Shades, chartRect{Class: class, X: chartNum(x0), Y: "0", W: chartNum(max(x1-x0, 1)), H: strconv.Itoa(chartPlotH),
			Title: title})
	}
	for _, o := range gaps.Outages {
		if o.Kind != "" && o.Kind != "outage" {
			continue // a restart while another instance served: nothing missed
		}
		// Red while this source's events of the window are missing; once
		// recovered (or covered by the provider's retries) it is drawn as
		// settled, so what still needs a hand stands out.
		class, state := "outage", ""
		for _, r := range o.Sources {
			if r.Source == source {
				state = r.Recovery
			}
		}
		switch state {
		case hookwarden.RecoveryRecovered, hookwarden.RecoveryRetried:
			class = "outage recovered"
			state = " — " + strings.ReplaceAll(state, "_", " ")
		case "":
		default:
			state = " — " + strings.ReplaceAll(state, "_", " ")
		}
		shade(class, o.Start, o.End, fmt.Sprintf("Hookwarden down %s → %s (%s)%s", o.Start.UTC().Format("Jan 2 15:04"),
			endText(o.End), dashDuration(o.Length), state))
	}
	for _, s := range gaps.Silences {
		if s.Source != source {
			continue
		}
		shade("silence", s.Start, s.End, fmt.Sprintf("%s silent %s → %s (%s)", source, s.Start.UTC().Format("Jan 2 15:04"),
			endText(s.End), dashDuration(s.Length)))
	}
	for d := start.Truncate(24 * time.Hour); d.Before(end); d = d.Add(24 * time.Hour) {
		if d.Before(start) {
			continue
		}
		c.Ticks = append(c.Ticks, chartTick{X: chartNum(x(d)), LabelX: chartNum(x(d) + 1.5), Label: d.Format("Mon 2")})
	}
	c.Label = fmt.Sprintf("%s over the last 7 days: %d accepted, %d duplicates; %d outage or silence window(s) shaded",
		source, acc, dup, len(c.Shades))
	return c
}

func endText(t time.Time) string {
	if t.IsZero() {
		return "now"
	}
	return t.UTC().Format("Jan 2 15:04")
}

package hookwarden

import (
	"strconv"
	"time"
)

// History describes the synthetic history the benchmark's history phase
// (make bench) builds in bulk, through a store's own tables, so that a
// store looks like one a busy source leaves after months, built in minutes
// instead: sqlitestore and pgstore both write it (FillHistory), the same
// rows on either.
//
// The claims are spread evenly over Span before now (within an hour of its
// ends), oldest first: the older ones folded by retention.payloads (a
// summary on the claim, its receipt, job and attempt gone, their counts in
// pruned_totals, as Prune leaves them), the newest Payloads kept whole: an
// accepted receipt with a Body-byte body, a delivered job and its attempt.
// Every fifth payload event has a duplicate receipt, one in a thousand a
// dead job. A prune pass with the same retention finds nothing to do.
//
// Sources: Source gets most claims, "other" one in four, "rare" one in a
// thousand; types cycle through 20 ("type.0" ...), and one in 5,000 claims
// is "rare.type". Destinations are SOURCE/app.
type History struct {
	Claims, Payloads int
	Source           string        // default "bench"
	Span             time.Duration // default 90 days
	PayloadSpan      time.Duration // the newest Payloads fill this much of Span; default 30 days
	Body             int           // default 1024
}

// WithDefaults is h with its zero fields set to their defaults and
// Payloads at most Claims.
func (h History) WithDefaults() History {
	if h.Span <= 0 {
		h.Span = 90 * 24 * time.Hour
	}
	if h.PayloadSpan <= 0 {
		h.PayloadSpan = 30 * 24 * time.Hour
	}
	if h.Body <= 0 {
		h.Body = 1024
	}
	if h.Source == "" {
		h.Source = "bench"
	}
	h.Payloads = min(max(h.Payloads, 0), h.Claims)
	return h
}

// HistoryLayout is where a History's claims fall, from now: claim i (1 to
// Claims) of the Folded oldest is claimed at FoldStart + (i-1)·FoldStep
// seconds, a payload claim i at PayStart + (i-Folded-1)·PayStep.
type HistoryLayout struct {
	Folded              int
	FoldStart, PayStart time.Time
	FoldStep, PayStep   float64 // seconds
}

// Layout places h's claims before now. Folded claims fill
// [now-Span, now-PayloadSpan), payload ones the rest up to a minute ago,
// an hour inside each bound, so that a prune pass with the same retention
// finds nothing to do.
func (h History) Layout(now time.Time) HistoryLayout {
	h = h.WithDefaults()
	l := HistoryLayout{Folded: h.Claims - h.Payloads,
		FoldStart: now.Add(-h.Span + time.Hour), PayStart: now.Add(-h.PayloadSpan + time.Hour)}
	end := now.Add(-time.Minute)
	step := func(from, to time.Time, n int) float64 {
		if n == 0 {
			return 0
		}
		return to.Sub(from).Seconds() / float64(n)
	}
	l.FoldStep, l.PayStep = step(l.FoldStart, l.PayStart, l.Folded), step(l.PayStart, end, h.Payloads)
	return l
}

// HistoryEventID is the event id the stores' bulk history gives claim i:
// eight hex digits in no order, (i × 2654435761) mod 4294967291, as a
// UUID's random lead (GitHub's and Shopify's ids) spreads new claims over
// the whole claim index; then a dash and i, which keeps the ids unique.
// sqlitestore and pgstore write the same in SQL (their historyRows).
func HistoryEventID(i int) string {
	x := strconv.FormatUint(uint64(i)*2654435761%4294967291, 16)
	return "00000000"[len(x):] + x + "-" + strconv.Itoa(i)
}

package main

import (
	"github.com/hookwarden/hookwarden/internal/metrics"
	"github.com/hookwarden/hookwarden/pgstore"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// What app.go finds by type assertion, kept true: both stores let the
// receiver refuse a one-time token already recorded with another body
// before extraction and filters (receiver.Options.Tokens), and the metrics
// count the filter evaluations refused by the decode bounds.
var (
	_ receiver.TokenReader           = (*sqlitestore.Store)(nil)
	_ receiver.TokenReader           = (*pgstore.Store)(nil)
	_ receiver.FilterRefusalObserver = (*metrics.Metrics)(nil)
)

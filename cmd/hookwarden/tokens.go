package main

import (
	"github.com/hookwarden/hookwarden/pgstore"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// Both stores let the receiver refuse a one-time token already recorded with
// another body before extraction and filters (receiver.Options.Tokens, set
// in app.go by a type assertion this keeps true).
var (
	_ receiver.TokenReader = (*sqlitestore.Store)(nil)
	_ receiver.TokenReader = (*pgstore.Store)(nil)
)

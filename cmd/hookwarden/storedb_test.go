package main

import (
	"database/sql"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// dbOf is the read pool of the store the program picked, for tests that
// look at the file's rows: the store is sqlitestore (store.go).
func dbOf(s hookwarden.Store) *sql.DB { return s.(*sqlitestore.Store).DB() }

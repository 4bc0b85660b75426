package sqlitestore

// schema20Undo are the statements that take a file back from schema 20
// (0020_sequence.sql) to 19, for the tests that rebuild an older file.
var schema20Undo = []string{`DROP TABLE seq_ranges`, `DROP TABLE seq_epochs`, `DROP TABLE late_events`, `PRAGMA user_version = 19`}

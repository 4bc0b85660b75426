package sqlitestore

// schema22Undo are the statements that take a file back from schema 22
// (0022_sequence.sql) to 21, for the tests that rebuild an older file.
var schema22Undo = []string{`DROP TABLE seq_ranges`, `DROP TABLE seq_epochs`, `DROP TABLE late_events`, `PRAGMA user_version = 21`}

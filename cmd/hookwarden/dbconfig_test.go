package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/internal/config"
)

// dbDoc is a complete configuration whose database section is db.
func dbDoc(db string) string {
	return fmt.Sprintf(`
database: %s
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    destinations: [{ name: app, url: "http://127.0.0.1:9/" }]
`, db, testSecret)
}

// TestDatabaseURLConfig: database.url (literal or a secret reference)
// replaces the default database.path; both set, an unresolvable reference
// or a URL that is not PostgreSQL's are errors at database.url, and the
// message never quotes the URL (it holds the password).
func TestDatabaseURLConfig(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HW_TEST_DB_URL", "postgres://hw:s3cret@db.example:5432/hookwarden?sslmode=verify-full")
	for _, c := range []struct {
		name, db, wantPath, errHas string
	}{
		{"literal", `{ url: "postgres://hw:s3cret@db.example/hookwarden" }`, "", ""},
		{"env", `{ url: "env:HW_TEST_DB_URL" }`, "", ""},
		{"path default", `{}`, filepath.Join(dir, "data", "hookwarden.db"), ""},
		{"both", `{ path: "hw.db", url: "env:HW_TEST_DB_URL" }`, "", "database.url: database.path and database.url are both set"},
		{"unset env", `{ url: "env:HW_TEST_NOT_SET" }`, "", "database.url: secret env:HW_TEST_NOT_SET: environment variable HW_TEST_NOT_SET is not set"},
		{"not postgres", `{ url: "mysql://hw:s3cret@db.example/x" }`, "", "database.url: not a PostgreSQL URL"},
		{"bad", `{ url: "postgres://hw:s3cret@db.example:notaport/x" }`, "", "database.url: not a valid PostgreSQL URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, problems, err := loadConfigIn([]byte(dbDoc(c.db)), "test", dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range config.Errors(problems) {
				got = append(got, p.String())
			}
			all := strings.Join(got, "\n")
			if strings.Contains(all, "s3cret") {
				t.Fatalf("a problem quotes the password:\n%s", all)
			}
			if c.errHas == "" {
				if len(got) > 0 {
					t.Fatalf("problems: %s", all)
				}
				if cfg.Database.Path != c.wantPath {
					t.Fatalf("database.path = %q, want %q", cfg.Database.Path, c.wantPath)
				}
				return
			}
			if !strings.Contains(all, c.errHas) {
				t.Fatalf("problems:\n%s\nwant one containing %q", all, c.errHas)
			}
		})
	}
	t.Run("packaged unit's path", func(t *testing.T) {
		// The unit sets the path; with a URL in the file that is both, and
		// the message says where the path came from. A drop-in clearing it
		// (an empty value) leaves the URL alone.
		t.Setenv("HOOKWARDEN_DATABASE_PATH", "/var/lib/hookwarden/hookwarden.db")
		_, problems, _ := loadConfigIn([]byte(dbDoc(`{ url: "env:HW_TEST_DB_URL" }`)), "test", dir)
		if errs := config.Errors(problems); len(errs) != 1 || !strings.Contains(errs[0].String(), "comes from HOOKWARDEN_DATABASE_PATH") {
			t.Fatalf("problems %v, want both set, naming the variable", errs)
		}
		t.Setenv("HOOKWARDEN_DATABASE_PATH", "")
		cfg, problems, _ := loadConfigIn([]byte(dbDoc(`{ url: "env:HW_TEST_DB_URL" }`)), "test", dir)
		if errs := config.Errors(problems); len(errs) != 0 || cfg.Database.Path != "" {
			t.Fatalf("with the variable cleared: %v, path %q; want the URL alone", errs, cfg.Database.Path)
		}
	})
	t.Run("environment override", func(t *testing.T) {
		t.Setenv("HOOKWARDEN_DATABASE_URL", "env:HW_TEST_DB_URL")
		cfg, problems, err := loadConfigIn([]byte(dbDoc(`{}`)), "test", dir)
		if err != nil || len(config.Errors(problems)) > 0 {
			t.Fatalf("%v %v", err, problems)
		}
		if cfg.Database.URL != "env:HW_TEST_DB_URL" || cfg.Database.Path != "" {
			t.Fatalf("database = %+v, want the URL from the environment and no path", cfg.Database)
		}
	})
}

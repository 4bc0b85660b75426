package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden"
)

// The command line: what a run of several minutes would otherwise find out
// only at its end (a history file that is not there, profiles no phase
// writes) is refused before anything starts, naming the flag.
func TestParseOptionsRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-history-from", filepath.Join(t.TempDir(), "missing.db")}, "-history-from"},
		{[]string{"-profile", t.TempDir(), "-phases", "matrix"}, "-profile"},
		{[]string{"-history-stores", "mysql"}, "-history-stores"},
		{[]string{"-phases", "history,nope"}, "-phases"},
		{[]string{"-history-ids", "random"}, "-history-ids"},
		{[]string{"-history-pg-shared-buffers", "1GB'\nfsync = off"}, "-history-pg-shared-buffers"},
		{[]string{"-history-pg-shared-buffers", "0MB"}, "-history-pg-shared-buffers"},
	} {
		_, err := parseOptions(tc.args, io.Discard)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want a usage error naming %s", tc.args, err, tc.want)
		}
	}
}

func TestParseOptionsHistory(t *testing.T) {
	from := filepath.Join(t.TempDir(), "history.db")
	if err := os.WriteFile(from, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parseOptions([]string{"-quick", "-phases", "history", "-profile", t.TempDir(), "-history-from", from,
		"-history-compacted=false"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.historyFrom != from || o.historyCompacted || !o.phases["history"] || o.phases["matrix"] {
		t.Errorf("options %+v", o)
	}
	// -quick shrinks the history unless the flags say otherwise.
	if o.historyClaims != 200_000 {
		t.Errorf("quick history claims %d, want 200000", o.historyClaims)
	}
	if o.historySharedBuffers != "128MB" {
		t.Errorf("history shared_buffers %q, want PostgreSQL's default 128MB", o.historySharedBuffers)
	}
	o, err = parseOptions([]string{"-quick", "-history-claims", "10000000"}, io.Discard)
	if err != nil || o.historyClaims != 10_000_000 || !o.historyCompacted {
		t.Errorf("explicit -history-claims under -quick: %v, %+v", err, o)
	}
}

// The history phase's ids: spread ones land among the history's claims, as
// a UUID would; ordered ones each after the last and after every one of the
// history's, as a ULID would. The two measurements rest on that.
func TestHistoryIDsSort(t *testing.T) {
	var history []string
	for i := range 1000 {
		history = append(history, hookwarden.HistoryEventID(i))
	}
	slices.Sort(history)
	for _, tc := range []struct {
		ids     string
		ordered bool
	}{{"spread", false}, {"ordered", true}} {
		o, err := parseOptions([]string{"-history-ids", tc.ids}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		b := &bench{o: o, key: []byte("k"), spreadGens: map[int]*generator{}}
		g := b.spreadGen(1024)
		var prev string
		inOrder, among := true, 0
		for range 1000 {
			id := string(g.appendID(nil, g.newID()))
			if id <= prev {
				inOrder = false
			}
			prev = id
			if at, _ := slices.BinarySearch(history, id); at < len(history) {
				among++
			}
		}
		if tc.ordered && (!inOrder || among != 0) {
			t.Errorf("%s: in order %v, %d of 1000 among the history's ids; want each after the last and all after the history", tc.ids, inOrder, among)
		}
		if !tc.ordered && (inOrder || among < 900) {
			t.Errorf("%s: in order %v, %d of 1000 among the history's ids; want them spread over it", tc.ids, inOrder, among)
		}
	}
}

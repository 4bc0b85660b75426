package extract

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// A JSON string id is decoded only when its value may fit MaxValueLen: a
// megabyte of escapes is reported too long without being decoded (it was
// unquoted whole first), while one at the limit is still found.
func TestLongEscapedValueNotDecoded(t *testing.T) {
	ex, err := Parse("json:id")
	if err != nil {
		t.Fatal(err)
	}
	at := `{"id":"` + strings.Repeat(`\u0041`, MaxValueLen) + `"}`
	if v, err := ex.Extract(nil, []byte(at)); err != nil || v != strings.Repeat("A", MaxValueLen) {
		t.Fatalf("%d escapes: %.20q %v, want found", MaxValueLen, v, err)
	}
	over := `{"id":"` + strings.Repeat(`\u0041`, MaxValueLen+1) + `"}`
	if _, err := ex.Extract(nil, []byte(over)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("%d escapes: %v, want not found", MaxValueLen+1, err)
	}
	huge := []byte(`{"id":"` + strings.Repeat(`\u00e9`, 1<<20/6) + `"}`)
	b := &Body{Bytes: huge}
	b.ValidJSON() // the receiver checks it once for every reader
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = ex.ExtractBody(nil, b)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("1 MiB of escapes: %v, want not found (too long)", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Fatalf("1 MiB of escapes: %d bytes allocated, want it not decoded", n)
	}
}

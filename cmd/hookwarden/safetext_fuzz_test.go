package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzSanitize: whatever the bytes, the escaped text is valid UTF-8 with no
// control character a terminal would act on (newline and tab only), plain
// printable text is left exactly as it was, and the JSON output escapes the
// same characters while decoding to the same string.
func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "plain text\n\tindented", evil, "\xff\xfe", "\xc2", "\xc2\x9b", "é ü 日本 🎉", "a\x00b\x7fc",
		"\u2028\u2029\u200f", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		out := sanitize(p)
		if !utf8.Valid(out) {
			t.Fatalf("sanitize(%q) = %q: not UTF-8", p, out)
		}
		if bad := rawControls(string(out)); len(bad) > 0 {
			t.Fatalf("sanitize(%q) = %q: raw %v", p, out, bad)
		}
		if !needsEscape(p) && !bytes.Equal(out, p) {
			t.Fatalf("sanitize changed plain text %q to %q", p, out)
		}
		if needsEscape(out) {
			t.Fatalf("sanitize(%q) = %q still needs escaping", p, out)
		}
		var w bytes.Buffer
		if _, err := newSafeWriter(&w).Write(p); err != nil || !bytes.Equal(w.Bytes(), out) {
			t.Fatalf("safeWriter wrote %q, sanitize %q (%v)", w.Bytes(), out, err)
		}
		if !utf8.Valid(p) {
			return // JSON strings are UTF-8; encoding/json replaces the rest
		}
		var j bytes.Buffer
		if err := writeJSONLine(&j, string(p)); err != nil {
			t.Fatal(err)
		}
		if bad := rawControls(string(bytes.TrimSuffix(j.Bytes(), []byte("\n")))); len(bad) > 0 {
			t.Fatalf("JSON of %q = %s: raw %v", p, j.Bytes(), bad)
		}
		var back string
		if err := json.Unmarshal(j.Bytes(), &back); err != nil || back != string(p) {
			t.Fatalf("JSON of %q = %s decodes to %q (%v)", p, j.Bytes(), back, err)
		}
		// JSON that went through the text escaping (serve's JSON logs) is
		// still JSON, and means the same.
		plain, _ := json.Marshal(string(p))
		if err := json.Unmarshal(sanitize(plain), &back); err != nil || back != string(p) {
			t.Fatalf("escaped JSON of %q = %s decodes to %q (%v)", p, sanitize(plain), back, err)
		}
	})
}

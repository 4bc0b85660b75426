package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed file is exactly what the generator writes, so nobody edits
// the vectors by hand and a change to the generator is committed with its
// output.
func TestCommittedFileIsGenerated(t *testing.T) {
	out := filepath.Join(t.TempDir(), "vectors.json")
	if err := run([]string{"-out", out, "-messaging", "../testdata/messaging_vectors.json"}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("internal/vectors/testdata/vectors.json differs from the generator's output at line %d:\n"+
				"committed: %s\ngenerated: %s\nrun `make vectors` and commit the result", i+1, w, g)
		}
	}
}

// A published example this code cannot reproduce fails the run: the check
// that makes the computed vectors trustworthy.
func TestGeneratorRefusesAnUnreproducedExample(t *testing.T) {
	g := &gen{}
	g.reproduce("example", "abc", "abc")
	if g.err != nil {
		t.Fatalf("equal values: %v", g.err)
	}
	g.reproduce("example", "abc", "abd")
	if g.err == nil {
		t.Fatal("a differing value was not reported")
	}
	if err := checkSendGridExample(
		"MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA==",
		"MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0=",
		"1588788368"+`{"category":"example_payload","event":"test_event","message_id":"message_id"}`); err == nil {
		t.Fatal("the SendGrid example verified over the wrong timestamp")
	}
}

// Signing is deterministic: two runs give the same bytes, or the committed
// file could never match.
func TestGenerateIsDeterministic(t *testing.T) {
	a, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	b, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two runs of the generator differ")
	}
}

// Every messaging vector reaches its verdict under this package's reference
// verifier (Go, independent of internal/signature and of the research's
// Python), the ten published examples included; a changed byte flips one.
func TestMessagingVectorsReproduced(t *testing.T) {
	n, err := checkMessagingFile("../testdata/messaging_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	if n != 10 {
		t.Fatalf("%d published examples checked, want 10", n)
	}
	b, err := os.ReadFile("../testdata/messaging_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []msgVector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Expected != "valid" || v.Query != "" || v.Provider == "telegram" || v.Provider == "msgraph" {
			continue // handshakes, and the schemes that sign nothing
		}
		v.Body += " "
		if ok, _ := msgVerdict(v); ok {
			t.Errorf("%s: still valid with a byte added to the body", v.name())
		}
	}
}

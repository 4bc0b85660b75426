package main

import (
	"os"
	"testing"
)

// FuzzLoadConfig: any document yields a config or problems, never a panic,
// and a document with problems never comes back as a usable config silently.
func FuzzLoadConfig(f *testing.F) {
	if b, err := os.ReadFile("../../config.example.yaml"); err == nil {
		f.Add(b)
	}
	f.Add(demoConfig)
	for _, s := range []string{
		"sources: [{name: a, scheme: stripe, secrets: [x], destinations: [{name: b, url: 'http://x/'}]}]",
		"listen: 5\nsources: 3",
		"retention: {claims: 1d2d}",
		"sources: [{destinations: [{timeout: 10, backoff: {initial: -1s}}]}]",
		"{{{",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		_, _, _ = loadConfig(doc, "fuzz")
	})
}

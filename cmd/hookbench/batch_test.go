package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// TestBuildMeta: the batch phase's requests are what Meta sends: the body
// signed in X-Hub-Signature-256 with the App Secret as is, n messages with
// ids unique across requests.
func TestBuildMeta(t *testing.T) {
	g := newMetaGenerator("whsec_c2VjcmV0", 10)
	lc := newLoadConn(&loadSpec{Addr: "127.0.0.1:1", Path: "/hooks/bench", Gen: g}, 1)
	seen := map[string]bool{}
	for _, n := range []uint64{1, 2} {
		lc.build(n)
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(lc.req)))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := req.Header.Get("X-Hub-Signature-256"), metaSignature("whsec_c2VjcmV0", body); got != want {
			t.Errorf("request %d: signature %q, want %q", n, got, want)
		}
		var wa struct {
			Entry []struct {
				Changes []struct {
					Value struct {
						Messages []struct{ ID string }
					}
				}
			}
		}
		if err := json.Unmarshal(body, &wa); err != nil {
			t.Fatalf("request %d: %v: %s", n, err, body)
		}
		msgs := wa.Entry[0].Changes[0].Value.Messages
		if len(msgs) != 10 {
			t.Fatalf("request %d: %d messages, want 10", n, len(msgs))
		}
		for _, m := range msgs {
			if seen[m.ID] {
				t.Errorf("id %s twice", m.ID)
			}
			seen[m.ID] = true
		}
	}
}

package backfill

import (
	"encoding/json"
	"testing"
)

// The page parsers read what a provider (or whatever answers at api_base)
// sends. Properties: no panic; a page either fails whole (nothing returned)
// or every event it returns has an id and a type, and its body is valid JSON;
// a cursor never comes out of an empty page.

func FuzzStripePage(f *testing.F) {
	f.Add([]byte(`{"object":"list","url":"/v1/events","has_more":true,"data":[{"id":"evt_1","object":"event","type":"invoice.paid","created":1700000000,"api_version":"2024-06-20","data":{"object":{}}}]}`))
	f.Add([]byte(`{"object":"list","has_more":false,"data":[]}`))
	f.Add([]byte(`{"object":"list","has_more":true,"data":[]}`))
	f.Add([]byte(`{"object":"list","has_more":false,"data":[{"id":"evt_1","type":"a","created":null}]}`))
	f.Add([]byte(`{"error":{"type":"invalid_request_error","message":"no"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseStripePage(b)
		if err != nil {
			if p.Events != nil || p.HasMore {
				t.Fatalf("error %v with a page", err)
			}
			return
		}
		if p.HasMore && len(p.Events) == 0 {
			t.Fatal("has_more without a cursor")
		}
		for _, e := range p.Events {
			if e.ID == "" || e.Type == "" || !json.Valid(e.Body) {
				t.Fatalf("event %+v", e)
			}
		}
	})
}

func FuzzGitHubPage(f *testing.F) {
	f.Add([]byte(`[{"id":12345678,"guid":"0b989ba4-242f-11e5-81e1-c7b6966d2516","delivered_at":"2019-06-03T00:57:16Z","redelivery":false,"duration":0.27,"status":"OK","status_code":200,"event":"issues","action":"opened","installation_id":123,"repository_id":456}]`),
		`<https://api.github.com/repos/o/r/hooks/1/deliveries?per_page=100&cursor=v1_12077215967>; rel="next", <https://api.github.com/repos/o/r/hooks/1/deliveries?per_page=100>; rel="first"`)
	f.Add([]byte(`[]`), ``)
	f.Add([]byte(`[null]`), `<x>; rel=next`)
	f.Add([]byte(`{"message":"Bad credentials"}`), `<a,b>; rel="prev next"`)
	f.Fuzz(func(t *testing.T, b []byte, link string) {
		ds, next, err := parseGitHubPage(b, link)
		if err != nil {
			if ds != nil || next != "" {
				t.Fatalf("error %v with a page", err)
			}
			return
		}
		for _, d := range ds {
			if d.ID <= 0 || d.GUID == "" || d.DeliveredAt.IsZero() {
				t.Fatalf("delivery %+v", d)
			}
		}
	})
}

func FuzzPaddlePage(f *testing.F) {
	f.Add([]byte(`{"data":[{"event_id":"evt_01hv8x2acma2gz6he7xk4b7ps1","event_type":"transaction.completed","occurred_at":"2024-04-12T10:18:49.621022Z","notification_id":"ntf_01","data":{"id":"txn_1"}}],"meta":{"request_id":"r","pagination":{"per_page":200,"next":"https://api.paddle.com/events?after=evt_01hv8x2acma2gz6he7xk4b7ps1","has_more":true,"estimated_total":3}}}`))
	f.Add([]byte(`{"data":[],"meta":{"pagination":{"has_more":false}}}`))
	f.Add([]byte(`{"data":[],"meta":{"pagination":{"has_more":true}}}`))
	f.Add([]byte(`{"error":{"type":"request_error","code":"forbidden","detail":"no"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parsePaddlePage(b)
		if err != nil {
			if p.Events != nil || p.Next != "" {
				t.Fatalf("error %v with a page", err)
			}
			return
		}
		if p.HasMore && p.Next == "" {
			t.Fatal("has_more without a next url")
		}
		for _, e := range p.Events {
			if e.ID == "" || e.Type == "" || e.Created.IsZero() || !json.Valid(e.Body) {
				t.Fatalf("event %+v", e)
			}
		}
	})
}

// FuzzSvixRecover: the answer of a recover request is untrusted too.
func FuzzSvixRecover(f *testing.F) {
	f.Add([]byte(`{"id":"qtask_1srOrx2ZWZBpBUvZwXKQmoEYga2","status":"running","task":"endpoint.recover"}`))
	f.Add([]byte(`{"status":"running"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := parseSvixRecover(b)
		if (err == nil) == (id == "") {
			t.Fatalf("id %q with error %v", id, err)
		}
	})
}

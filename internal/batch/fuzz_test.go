package batch

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzSplit: on any input, every splitter returns events whose envelope is
// valid JSON holding the event's own bytes, which are bytes of the input;
// never more than MaxEvents, never a panic.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{whatsapp,
		`{"object":"page","entry":[{"messaging":[{"sender":{"id":"S"},"timestamp":1,"read":{}}],"changes":[{"value":{}}]}]}`,
		`{"destination":"U","events":[{"webhookEventId":"a"},{}]}`,
		`{"for_user_id":"1","a_events":[{"id":1}],"b_events":[{"id_str":"2"}],"c":{}}`,
		`{"value":[{"id":"1"},{}]}`, `[{"sg_event_id":"a"},1,"x"]`,
		`{"event":"e","event_ts":1,"payload":{"object":{"id":1}}}`, `{"event":{}}`,
	} {
		f.Add([]byte(s))
	}
	splitters := []Splitter{Meta, LINE, X, Graph, Array, Zoom, Viber, Telegram, Discord}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, split := range splitters {
			evs, err := split(body)
			if err != nil {
				continue
			}
			if len(evs) > MaxEvents {
				t.Fatalf("%d events", len(evs))
			}
			for _, ev := range evs {
				if !bytes.Contains(body, ev.Own) {
					t.Fatalf("own bytes not from the input: %q", ev.Own)
				}
				if ev.Body != nil && (!json.Valid(ev.Body) || !bytes.Contains(ev.Body, ev.Own)) {
					t.Fatalf("envelope %q of %q", ev.Body, body)
				}
				if ev.Derived && ev.ID != Derive(ev.Own) {
					t.Fatalf("derived id %q", ev.ID)
				}
			}
		}
	})
}

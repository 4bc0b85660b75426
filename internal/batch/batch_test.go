package batch

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// A WhatsApp batch: two messages and a status in one change, the status
// sharing nothing with the messages, non-ASCII as Meta sends it (\u
// escapes) and raw UTF-8 beside it, to check both survive byte for byte.
const whatsapp = `{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},"contacts":[{"profile":{"name":"Jos\u00e9"},"wa_id":"16505551234"}],"messages":[{"from":"16505551234","id":"wamid.A","timestamp":"1749416383","type":"text","text":{"body":"caf\u00e9 \ud83d\ude00"}}, {"from":"16505551234","id":"wamid.B","timestamp":"1749416384","type":"text","text":{"body":"crème"}}],"statuses":[{"id":"wamid.Z","status":"read","timestamp":"1749416390","recipient_id":"16505551234"}]},"field":"messages"}]}]}`

func TestMetaOneEnvelopePerEvent(t *testing.T) {
	evs, err := Meta([]byte(whatsapp))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ id, own, notIn string }{
		{"wamid.A", `{"from":"16505551234","id":"wamid.A","timestamp":"1749416383","type":"text","text":{"body":"caf\u00e9 \ud83d\ude00"}}`, "wamid.B"},
		{"wamid.B", `{"from":"16505551234","id":"wamid.B","timestamp":"1749416384","type":"text","text":{"body":"crème"}}`, "wamid.A"},
		{"wamid.Z:read", `{"id":"wamid.Z","status":"read","timestamp":"1749416390","recipient_id":"16505551234"}`, "wamid.A"},
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d", len(evs), len(want))
	}
	for i, w := range want {
		ev := evs[i]
		if ev.ID != w.id || ev.Derived {
			t.Errorf("event %d: id %q derived %v, want %q", i, ev.ID, ev.Derived, w.id)
		}
		if string(ev.Own) != w.own {
			t.Errorf("event %d: own %s, want %s", i, ev.Own, w.own)
		}
		if !json.Valid(ev.Body) || !bytes.Contains(ev.Body, ev.Own) || bytes.Contains(ev.Body, []byte(w.notIn)) {
			t.Errorf("event %d: envelope %s", i, ev.Body)
		}
		// The envelope keeps everything around the event as sent.
		for _, keep := range []string{`"object":"whatsapp_business_account"`, `"contacts":[{"profile":{"name":"Jos\u00e9"}`, `"field":"messages"`, `"metadata":{"display_phone_number"`} {
			if !bytes.Contains(ev.Body, []byte(keep)) {
				t.Errorf("event %d: envelope lost %s: %s", i, keep, ev.Body)
			}
		}
	}
	// The first message's envelope, exactly: the statuses array is left out.
	wantEnv := `{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},"contacts":[{"profile":{"name":"Jos\u00e9"},"wa_id":"16505551234"}],"messages":[` + want[0].own + `]},"field":"messages"}]}]}`
	if string(evs[0].Body) != wantEnv {
		t.Errorf("envelope\n got %s\nwant %s", evs[0].Body, wantEnv)
	}
	wantStatus := `{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},"contacts":[{"profile":{"name":"Jos\u00e9"},"wa_id":"16505551234"}],"statuses":[` + want[2].own + `]},"field":"messages"}]}]}`
	if string(evs[2].Body) != wantStatus {
		t.Errorf("status envelope\n got %s\nwant %s", evs[2].Body, wantStatus)
	}
}

func TestMetaMessengerAndOtherChanges(t *testing.T) {
	body := `{"object":"page","entry":[{"id":"1","time":1,"messaging":[{"sender":{"id":"S"},"recipient":{"id":"R"},"timestamp":10,"message":{"mid":"m.1","text":"hi"}},{"sender":{"id":"S"},"recipient":{"id":"R"},"timestamp":11,"read":{"watermark":9}}]},{"id":"2","time":2,"changes":[{"field":"feed","value":{"item":"comment"}}]}]}`
	evs, err := Meta([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3", len(evs))
	}
	if evs[0].ID != "m.1" || evs[1].ID != "read:11:S" || !evs[2].Derived || evs[2].ID != Derive([]byte(`{"field":"feed","value":{"item":"comment"}}`)) {
		t.Errorf("ids %q %q %q (derived %v)", evs[0].ID, evs[1].ID, evs[2].ID, evs[2].Derived)
	}
	if want := `{"object":"page","entry":[{"id":"1","time":1,"messaging":[{"sender":{"id":"S"},"recipient":{"id":"R"},"timestamp":11,"read":{"watermark":9}}]}]}`; string(evs[1].Body) != want {
		t.Errorf("envelope %s", evs[1].Body)
	}
	if want := `{"object":"page","entry":[{"id":"2","time":2,"changes":[{"field":"feed","value":{"item":"comment"}}]}]}`; string(evs[2].Body) != want {
		t.Errorf("envelope %s", evs[2].Body)
	}
}

func TestLineXGraphArray(t *testing.T) {
	cases := []struct {
		name  string
		split Splitter
		body  string
		ids   []string
		env0  string
	}{
		{"line", LINE, `{"destination":"U1","events":[{"type":"message","webhookEventId":"01A","x":1},{"type":"follow","webhookEventId":"01B"}]}`,
			[]string{"01A", "01B"}, `{"destination":"U1","events":[{"type":"message","webhookEventId":"01A","x":1}]}`},
		{"line verify", LINE, `{"destination":"U1","events":[]}`, nil, ""},
		{"x", X, `{"for_user_id":"9","tweet_create_events":[{"id_str":"100","text":"a"}],"favorite_events":[{"id":"f1"},{"id":"f2"}],"users":{"9":{}}}`,
			[]string{"tweet_create_events:100", "favorite_events:f1", "favorite_events:f2"}, `{"for_user_id":"9","tweet_create_events":[{"id_str":"100","text":"a"}],"users":{"9":{}}}`},
		{"graph", Graph, `{"value":[{"id":"n1","clientState":"s"},{"clientState":"s","changeType":"created"}]}`,
			[]string{"n1", Derive([]byte(`{"clientState":"s","changeType":"created"}`))}, `{"value":[{"id":"n1","clientState":"s"}]}`},
		{"sendgrid", Array, ` [ {"sg_event_id":"a"} , {"sg_event_id":"b"} ] `, []string{"", ""}, ` [{"sg_event_id":"a"}] `},
	}
	for _, c := range cases {
		evs, err := c.split([]byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(evs) != len(c.ids) {
			t.Fatalf("%s: %d events, want %d", c.name, len(evs), len(c.ids))
		}
		for i, id := range c.ids {
			if evs[i].ID != id {
				t.Errorf("%s: event %d id %q, want %q", c.name, i, evs[i].ID, id)
			}
		}
		if len(evs) > 0 && string(evs[0].Body) != c.env0 {
			t.Errorf("%s: envelope %s, want %s", c.name, evs[0].Body, c.env0)
		}
	}
}

func TestSingles(t *testing.T) {
	cases := []struct {
		split   Splitter
		body    string
		id      string
		derived bool
	}{
		{Zoom, `{"event":"meeting.started","event_ts":1635885799302,"payload":{"object":{"uuid":"u==","id":5}}}`, "meeting.started:1635885799302:u==", false},
		{Viber, `{"event":"delivered","timestamp":1,"message_token":4912661846655238145}`, "delivered:4912661846655238145", false},
		{Telegram, "{\"update_id\":10000,\n\"message\":{}}", "10000", false},
		{Discord, `{"id":"1234","type":2,"token":"t"}`, "1234", false},
		{Discord, `{"version":1,"application_id":"1","type":1,"event":{"type":"APPLICATION_AUTHORIZED","timestamp":"2024"}}`, Derive([]byte(`{"type":"APPLICATION_AUTHORIZED","timestamp":"2024"}`)), true},
	}
	for _, c := range cases {
		evs, err := c.split([]byte(c.body))
		if err != nil || len(evs) != 1 {
			t.Fatalf("%s: %v %d", c.body, err, len(evs))
		}
		if evs[0].ID != c.id || evs[0].Derived != c.derived || evs[0].Body != nil {
			t.Errorf("%s: id %q derived %v body %s", c.body, evs[0].ID, evs[0].Derived, evs[0].Body)
		}
	}
}

func TestBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"events":[`)
	for i := range MaxEvents + 1 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"webhookEventId":"x"}`)
	}
	b.WriteString(`]}`)
	if _, err := LINE([]byte(b.String())); err != ErrTooMany {
		t.Fatalf("over the limit: %v, want ErrTooMany", err)
	}
	for _, bad := range []string{``, `[`, `"s"`, `{"entry":{}}`, `{"entry":[1]}`} {
		if _, err := Meta([]byte(bad)); err == nil {
			t.Errorf("Meta(%q): no error", bad)
		}
	}
	deep := strings.Repeat(`{"entry":[`, 5000) + strings.Repeat(`]}`, 5000)
	if _, err := Meta([]byte(deep)); err != nil && err != ErrShape && err != ErrNotJSON {
		t.Errorf("deep: %v", err)
	}
}

package config

import (
	"strings"
	"testing"
)

// Each messaging preset is a complete source with name, scheme, secrets and
// a destination; a secret of the wrong format is reported under its own
// key path, without its value.
func TestMessagingSchemesAndSecretFormats(t *testing.T) {
	const hexKey = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
	const b64Key = "PUAXw+hDiVqStwqnTRt+vJyYLM8uxJaMwM1V8Sr0Zgw="
	ok := map[string]string{"meta": "app-secret", "telegram": "tg_Secret-Token_0123", "line": "channel-secret",
		"discord": hexKey, "x": "consumer-secret", "zoom": "zoom-token", "vonage": "sig-secret", "telnyx": b64Key,
		"viber": "bot-token", "intercom": "client-secret", "zendesk": "dGhpc19zZWNyZXQ=", "graph": "SecretClientState"}
	for scheme, secret := range ok {
		c := Config{Sources: []Source{{Name: "s", Scheme: scheme, Secrets: []Secret{Secret(secret)},
			Destinations: []Destination{{Name: "app", URL: "http://127.0.0.1:3000/"}}}}}
		c.ApplyDefaults()
		if ps := Errors(c.Validate()); len(ps) != 0 {
			t.Errorf("%s: %v", scheme, ps)
		}
		if c.Sources[0].EventID == "" || c.Sources[0].RetryHorizon.D() <= 0 {
			t.Errorf("%s: preset defaults not applied: %+v", scheme, c.Sources[0])
		}
	}
	for _, tc := range []struct{ scheme, good, bad, want string }{
		{"discord", hexKey, "bm90LWhleA==", "32 bytes, hex"},
		{"discord", hexKey, hexKey[:62], "32 bytes, hex"},
		{"telnyx", b64Key, hexKey, "32 bytes, base64"},
		{"telegram", "ok_token", "has spaces!", "A-Z, a-z, 0-9, _ and -"},
		{"telegram", "ok_token", strings.Repeat("a", 257), "1-256"},
	} {
		c := Config{Sources: []Source{{Name: "s", Scheme: tc.scheme, Secrets: []Secret{Secret(tc.good), Secret(tc.bad)}}}}
		c.ApplyDefaults()
		ps := Errors(c.Validate())
		if len(ps) != 1 || ps[0].Path != "sources[0].secrets[1]" || !strings.Contains(ps[0].Message, tc.want) {
			t.Errorf("%s %q: got %v, want one problem at sources[0].secrets[1] saying %q", tc.scheme, tc.bad, ps, tc.want)
		}
		for _, p := range ps {
			if len(tc.bad) > 4 && strings.Contains(p.Message, tc.bad) {
				t.Errorf("%s: the problem shows the secret: %s", tc.scheme, p.Message)
			}
		}
	}
}

// The body-replay check guards a signature that covers the body but not
// the id (github's header id); the batch schemes' ids are in the bytes
// their signature covers (graph signs nothing), so none of them takes it
// (docs/reference.md, Messaging platforms).
func TestBatchSchemesTakeNoBodyReplayCheck(t *testing.T) {
	for _, tc := range []struct {
		scheme string
		want   bool
	}{{"github", true}, {"meta", false}, {"line", false}, {"x", false}, {"graph", false}, {"sendgrid", false}} {
		c := Config{Sources: []Source{{Name: "s", Scheme: tc.scheme, Secrets: []Secret{"secret"},
			Destinations: []Destination{{Name: "app", URL: "http://127.0.0.1:3000/"}}}}}
		c.ApplyDefaults()
		if got := c.Sources[0].BodyReplayCheck(); got != tc.want {
			t.Errorf("%s: body-replay check %v, want %v", tc.scheme, got, tc.want)
		}
	}
}

package signature

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// Microsoft Graph change notifications: no signature. The subscription's
// clientState (a secret the app chose) comes back in every item of value[];
// every item's clientState must equal one of the configured secrets
// (constant time, hashed first), or the request is refused: one request may
// mix subscriptions, and each item must prove its own. Rich notifications'
// validationTokens (JWTs signed by Entra ID) are not checked. Sources:
// microsoftgraph/microsoft-graph-docs-contrib
// concepts/change-notifications-delivery-webhooks.md and
// api-reference/v1.0/resources/changenotification.md.
//
// The validationToken handshake is answered by the receiver, and accepted
// notifications get 202 there.
//
// EventID and EventType apply to one item of value[], which the batch
// splitter hands them: id (optional; without it the splitter derives one
// from the SHA-256 of the item's bytes), and the lifecycle event or change
// type.

func init() {
	register(&scheme{
		name: "graph",
		preset: Preset{
			EventID:   "json:id",
			EventType: "json:lifecycleEvent|json:changeType",
			// "tries to resend ... for up to 4 hours".
			RetryHorizon: 4 * time.Hour,
		},
		build: func(p Params) (Verifier, error) {
			v := &graphVerifier{}
			for _, s := range p.Secrets {
				v.states = append(v.states, sha256.Sum256([]byte(s)))
			}
			return v, nil
		},
		sign: signGraph,
	})
}

type graphVerifier struct{ states [][32]byte }

// graphItems decodes value[] keeping each item's members by exact name
// (encoding/json would match "ClientState" to a struct's clientState).
func graphItems(body []byte) ([]map[string]json.RawMessage, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, errors.New("body is not a JSON object")
	}
	var items []map[string]json.RawMessage
	if raw, ok := doc["value"]; !ok || json.Unmarshal(raw, &items) != nil {
		return nil, errors.New("body has no value array of objects")
	}
	return items, nil
}

func (v *graphVerifier) Verify(r *Request) error {
	const sc = "graph"
	items, err := graphItems(r.Body)
	if err != nil {
		return fail(sc, ErrMalformed, err.Error())
	}
	if len(items) == 0 {
		return fail(sc, ErrMissing, "value[] is empty: no clientState to check")
	}
	for _, it := range items {
		var cs string
		if raw, ok := it["clientState"]; !ok || json.Unmarshal(raw, &cs) != nil || cs == "" {
			return fail(sc, ErrMissing, "an item of value[] has no clientState")
		}
		sum := sha256.Sum256([]byte(cs))
		ok := false
		for _, s := range v.states {
			ok = hmac.Equal(sum[:], s[:]) || ok
		}
		if !ok {
			return fail(sc, ErrMismatch, "an item's clientState matches no secret")
		}
	}
	return nil
}

// signGraph puts the first secret as clientState in every item of value[];
// a body that is not a notification is wrapped as the one item of one. The
// items are re-encoded (their members sorted): a test request, not a copy of
// what Graph would send.
func signGraph(p Params, body []byte, _ time.Time, _ string) (http.Header, []byte, error) {
	items, err := graphItems(body)
	if err != nil {
		var one map[string]json.RawMessage
		if json.Unmarshal(body, &one) != nil {
			return nil, nil, errors.New("the body is not a JSON object")
		}
		items = []map[string]json.RawMessage{one}
	}
	cs, _ := json.Marshal(p.Secrets[0])
	for _, it := range items {
		it["clientState"] = cs
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"value": items}); err != nil {
		return nil, nil, err
	}
	return http.Header{}, bytes.TrimRight(buf.Bytes(), "\n"), nil
}

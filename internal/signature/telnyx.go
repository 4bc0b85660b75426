package signature

import (
	"encoding/base64"
	"net/http"
	"time"
)

// Telnyx: telnyx-signature-ed25519 = base64 Ed25519 signature of
// telnyx-timestamp + "|" + raw body; secrets are the public key from Mission
// Control, base64 (32 bytes); 300 s in both directions, as the SDKs.
// Sources: team-telnyx/telnyx-go lib/webhook_verification.go; telnyx-node
// src/lib/webhooks.ts. A retry carries meta.attempt in the body, so it is
// signed anew.
//
// One event a request: data.id (a UUID) is the id, data.event_type the type.
//
// Sign is refused (only Telnyx holds the private key); tests sign with their
// own key pair through SignEd25519.

func init() {
	register(&scheme{
		name: "telnyx",
		preset: Preset{
			EventID:   "json:data.id",
			EventType: "json:data.event_type",
			// Messaging: up to 3 attempts per URL, then the failover URL; the
			// intervals are not published, an hour is a margin.
			RetryHorizon: time.Hour,
			Tolerance:    5 * time.Minute,
		},
		build: func(p Params) (Verifier, error) {
			keys, err := ed25519Keys(p.Secrets, base64.StdEncoding.DecodeString, "base64")
			if err != nil {
				return nil, err
			}
			return &ed25519Verifier{scheme: "telnyx", sigHeader: "Telnyx-Signature-Ed25519", tsHeader: "Telnyx-Timestamp",
				sep: []byte{'|'}, decode: base64.StdEncoding.DecodeString, enc: "base64", keys: keys, tol: p.Tolerance}, nil
		},
		sign: func(Params, []byte, time.Time, string) (http.Header, []byte, error) {
			return nil, nil, errNoPrivateKey("Telnyx")
		},
	})
}

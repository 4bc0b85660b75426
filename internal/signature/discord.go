package signature

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Discord (interactions and Webhook Events): X-Signature-Ed25519 = hex
// Ed25519 signature of X-Signature-Timestamp + raw body (no separator), by
// the application's key; secrets are its public key, hex (32 bytes), from
// the Developer Portal. Discord answers need a 401 on a bad signature and
// probes with invalid ones on purpose. Sources: discord/discord-api-docs
// developers/interactions/overview.mdx and developers/events/webhook-events.mdx;
// discord/discord-interactions-js verifyKey.
//
// Discord documents no window on the timestamp (its libraries check none);
// the tolerance here is receiver policy and wide, 15 min, so a Webhook Event
// retried for its 10 minutes passes even if it kept its first timestamp.
//
// Interactions: id (a snowflake) is the event id, type plus data.name the
// type. Webhook Events carry no id: the receiver derives one from the SHA-256
// of the event's bytes (retries of identical bytes are duplicates). PINGs
// (type 1 interactions, type 0 events) are the receiver's handshakes.
//
// Sign is refused (only Discord holds the private key); tests sign with
// their own key pair through SignEd25519.

func init() {
	register(&scheme{
		name: "discord",
		preset: Preset{
			EventID:   "json:id",
			EventType: "json:event.type|json:type+json:data.name|json:type",
			// An interaction's id is a snowflake: its time is in its high bits.
			EventTime: "snowflake:json:id",
			// Webhook Events: exponential backoff for up to 10 minutes;
			// interactions are not retried.
			RetryHorizon: 10 * time.Minute,
			Tolerance:    15 * time.Minute,
		},
		build: func(p Params) (Verifier, error) {
			keys, err := ed25519Keys(p.Secrets, hex.DecodeString, "hex")
			if err != nil {
				return nil, err
			}
			return &ed25519Verifier{scheme: "discord", sigHeader: "X-Signature-Ed25519", tsHeader: "X-Signature-Timestamp",
				decode: hex.DecodeString, enc: "hex", keys: keys, tol: p.Tolerance}, nil
		},
		sign: func(Params, []byte, time.Time, string) (http.Header, []byte, error) {
			return nil, nil, errNoPrivateKey("Discord")
		},
	})
}

// ed25519Verifier serves discord (hex, ts+body) and telnyx (base64, ts|body).
type ed25519Verifier struct {
	scheme, sigHeader, tsHeader string
	sep                         []byte // between timestamp and body
	decode                      func(string) ([]byte, error)
	enc                         string // decode's name, for errors
	keys                        []ed25519.PublicKey
	tol                         time.Duration
}

// ed25519Keys parses public keys, each decoded by dec (named enc) to
// exactly 32 bytes.
func ed25519Keys(secrets []string, dec func(string) ([]byte, error), enc string) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for i, s := range secrets {
		b, err := dec(s)
		if err != nil || len(b) != ed25519.PublicKeySize {
			return nil, secretErr(i, "want the platform's Ed25519 public key: %d bytes, %s", ed25519.PublicKeySize, enc)
		}
		keys = append(keys, ed25519.PublicKey(b))
	}
	return keys, nil
}

// ed25519Match reports whether sig verifies msg under any of keys.
func ed25519Match(keys []ed25519.PublicKey, sig, msg []byte) bool {
	for _, k := range keys {
		if ed25519.Verify(k, msg, sig) {
			return true
		}
	}
	return false
}

func (v *ed25519Verifier) Verify(r *Request) error {
	sc := v.scheme
	sigText, err := header(sc, r.Header, v.sigHeader)
	if err != nil {
		return err
	}
	ts, err := header(sc, r.Header, v.tsHeader)
	if err != nil {
		return err
	}
	sig, err := v.decode(sigText)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fail(sc, ErrMalformed, v.sigHeader+" is not a "+v.enc+" Ed25519 signature")
	}
	if err := checkFresh(sc, ts, r.Now, v.tol); err != nil {
		return err
	}
	msg := make([]byte, 0, len(ts)+len(v.sep)+len(r.Body))
	msg = append(append(append(msg, ts...), v.sep...), r.Body...)
	if ed25519Match(v.keys, sig, msg) {
		return nil
	}
	return fail(sc, ErrMismatch, v.sigHeader+" matches no public key")
}

// SignEd25519 returns the headers of a request to a discord or telnyx source
// signed with priv at now, as the platform signs it. The configured secret
// of such a source is the public half of priv. For tests and local tools:
// the platforms' own private keys are never available.
func SignEd25519(scheme string, priv ed25519.PrivateKey, body []byte, now time.Time) (http.Header, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("signature: %s: sign: the private key is %d bytes, want %d", scheme, len(priv), ed25519.PrivateKeySize)
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	h := http.Header{}
	switch scheme {
	case "discord":
		h.Set("X-Signature-Timestamp", ts)
		h.Set("X-Signature-Ed25519", hex.EncodeToString(ed25519.Sign(priv, append([]byte(ts), body...))))
	case "telnyx":
		h.Set("Telnyx-Timestamp", ts)
		h.Set("Telnyx-Signature-Ed25519", base64.StdEncoding.EncodeToString(ed25519.Sign(priv, append([]byte(ts+"|"), body...))))
	default:
		return nil, fmt.Errorf("signature: SignEd25519: scheme %q does not sign with Ed25519; want discord or telnyx", scheme)
	}
	return h, nil
}

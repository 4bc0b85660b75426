package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Postmark signs nothing: the webhook URL embeds Basic auth credentials
// (https://user:pass@host/path), checked here in constant time. Secrets are
// "user:password". The receiver must redact Authorization before storing
// headers. Source: postmarkapp.com/developer/webhooks/webhooks-overview.

func init() {
	register(&scheme{
		name: "postmark",
		preset: Preset{
			// No event id exists: RecordType + MessageID + the record's own
			// time (opens and clicks repeat per message), else MessageID
			// (inbound messages have no RecordType).
			EventID: "json:RecordType+json:MessageID+json:ReceivedAt" +
				"|json:RecordType+json:MessageID+json:DeliveredAt" +
				"|json:RecordType+json:MessageID+json:BouncedAt" +
				"|json:RecordType+json:MessageID+json:ChangedAt" +
				"|json:RecordType+json:MessageID" +
				"|json:MessageID",
			EventType: "json:RecordType",
			// Inbound: 10 retries over about 10.5 h.
			RetryHorizon: 11 * time.Hour,
		},
		build: buildPostmark,
		sign: func(p Params, _ []byte, _ time.Time, _ string) (http.Header, []byte, error) {
			h := http.Header{}
			h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(p.Secrets[0])))
			return h, nil, nil
		},
	})
}

type postmarkVerifier struct{ creds [][32]byte }

func buildPostmark(p Params) (Verifier, error) {
	v := &postmarkVerifier{}
	for i, s := range p.Secrets {
		if !strings.Contains(s, ":") {
			return nil, fmt.Errorf("secrets[%d]: want \"user:password\"", i)
		}
		v.creds = append(v.creds, sha256.Sum256([]byte(s)))
	}
	return v, nil
}

func (v *postmarkVerifier) Verify(r *Request) error {
	const sc = "postmark"
	a, err := header(sc, r.Header, "Authorization")
	if err != nil {
		return err
	}
	kind, enc, ok := strings.Cut(a, " ")
	if !ok || !strings.EqualFold(kind, "Basic") {
		return fail(sc, ErrMalformed, "Authorization is not Basic")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return fail(sc, ErrMalformed, "Authorization Basic credentials are not base64")
	}
	// Hash first so the comparison takes the same time whatever the lengths.
	got := sha256.Sum256(raw)
	for _, c := range v.creds {
		if hmac.Equal(got[:], c[:]) {
			return nil
		}
	}
	return fail(sc, ErrMismatch, "Basic credentials match no secret")
}

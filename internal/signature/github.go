package signature

import (
	"crypto/hmac"
	"net/http"
	"strings"
	"time"
)

// GitHub: X-Hub-Signature-256 = "sha256=" + lowercase hex HMAC-SHA256(secret, body).
// Compared as exact strings: GitHub sends lowercase, so uppercase hex is
// refused (vector github/uppercase_hex). The legacy SHA-1 X-Hub-Signature
// alone is refused. No timestamp: dedupe on X-GitHub-Delivery is the only
// replay defence. Source: github/docs validating-webhook-deliveries.md.

func init() {
	register(&scheme{
		name: "github",
		preset: Preset{
			EventID:   "header:X-GitHub-Delivery",
			EventType: "header:X-GitHub-Event",
			// GitHub never retries on its own; redelivery is manual.
			RetryHorizon: 0,
		},
		build: func(p Params) (Verifier, error) {
			return &githubVerifier{keys: rawKeys(p.Secrets)}, nil
		},
		sign: signGitHub,
	})
}

type githubVerifier struct{ keys [][]byte }

func (v *githubVerifier) Verify(r *Request) error {
	const sc = "github"
	if r.Header.Get("X-Hub-Signature-256") == "" && r.Header.Get("X-Hub-Signature") != "" {
		return fail(sc, ErrMissing, "only the legacy SHA-1 X-Hub-Signature is present; X-Hub-Signature-256 is required")
	}
	got, err := header(sc, r.Header, "X-Hub-Signature-256")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(got, "sha256=") {
		return fail(sc, ErrMalformed, `X-Hub-Signature-256 lacks the "sha256=" prefix`)
	}
	for _, k := range v.keys {
		if hmac.Equal(githubSig(k, r.Body), []byte(got)) {
			return nil
		}
	}
	return fail(sc, ErrMismatch, "X-Hub-Signature-256 matches no secret")
}

func githubSig(key, body []byte) []byte {
	return append([]byte("sha256="), hexOf(mac256(key, body))...)
}

func signGitHub(p Params, body []byte, _ time.Time, msgID string) (http.Header, []byte, error) {
	h := http.Header{}
	h.Set("X-Hub-Signature-256", string(githubSig([]byte(p.Secrets[0]), body)))
	h.Set("X-GitHub-Event", "ping")
	if msgID != "" {
		h.Set("X-GitHub-Delivery", msgID)
	}
	return h, nil, nil
}

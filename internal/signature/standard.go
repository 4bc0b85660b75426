package signature

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks (and Svix, same math under svix-* names):
// webhook-signature = space-separated "v1,<base64 HMAC-SHA256(key, id.ts.body)>",
// key = base64-decode(secret after "whsec_").
// Spec: standard-webhooks/standard-webhooks spec/standard-webhooks.md.

func init() {
	register(&scheme{
		name: "standard",
		preset: Preset{
			EventID:   "header:webhook-id|header:svix-id",
			EventType: "json:type",
			// Svix schedule: 5 s, 5 m, 30 m, 2 h, 5 h, 10 h, 10 h ≈ 27.6 h.
			RetryHorizon: 28 * time.Hour,
			Tolerance:    5 * time.Minute,
		},
		build: buildStandard,
		sign:  signStandard,
	})
}

const whsecPrefix = "whsec_"

// StandardKey derives the HMAC key of a Standard Webhooks secret:
// "whsec_<base64>" gives the decoded bytes, any other string its raw bytes.
// The error never contains the secret.
func StandardKey(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, whsecPrefix)
	if !ok {
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		// Some senders drop the padding.
		key, err = base64.RawStdEncoding.DecodeString(rest)
	}
	if err != nil || len(key) == 0 {
		return nil, errors.New("whsec_ secret is not valid base64 after the prefix")
	}
	return key, nil
}

// SignStandard returns the webhook-signature value ("v1,<base64>") of a
// forwarded request, per the Standard Webhooks spec, so the user's app can
// verify it with any Standard Webhooks library. Use a "whsec_" secret: other
// strings are used as raw key bytes, which those libraries only accept through
// their raw-key constructors.
func SignStandard(secret, msgID string, ts time.Time, body []byte) (string, error) {
	if msgID == "" {
		return "", errors.New("signature: standard: sign: message id is empty")
	}
	key, err := StandardKey(secret)
	if err != nil {
		return "", fmt.Errorf("signature: standard: sign: %w", err)
	}
	return "v1," + string(standardMAC(key, msgID, strconv.FormatInt(ts.Unix(), 10), body)), nil
}

func standardMAC(key []byte, id, ts string, body []byte) []byte {
	return b64Of(mac256(key, []byte(id), []byte{'.'}, []byte(ts), []byte{'.'}, body))
}

type standardVerifier struct {
	keys [][]byte
	tol  time.Duration
}

func buildStandard(p Params) (Verifier, error) {
	v := &standardVerifier{tol: p.Tolerance}
	for i, s := range p.Secrets {
		k, err := StandardKey(s)
		if err != nil {
			return nil, fmt.Errorf("secrets[%d]: %w", i, err)
		}
		v.keys = append(v.keys, k)
	}
	return v, nil
}

func (v *standardVerifier) Verify(r *Request) error {
	const sc = "standard"
	// Prefer webhook-*, fall back to Svix's default names; never mix families,
	// since id and timestamp must come from the set the signature covers.
	prefix := "webhook-"
	if r.Header.Get("webhook-signature") == "" && r.Header.Get("svix-signature") != "" {
		prefix = "svix-"
	}
	sig, err := header(sc, r.Header, prefix+"signature")
	if err != nil {
		return err
	}
	id, err := header(sc, r.Header, prefix+"id")
	if err != nil {
		return err
	}
	ts, err := header(sc, r.Header, prefix+"timestamp")
	if err != nil {
		return err
	}
	// Only the family that carried the signature is signed. An event id or
	// type may be read from either (the default is
	// header:webhook-id|header:svix-id, and users write the reverse): the
	// other family's id and timestamp, when present, must repeat the
	// signed ones, or a fresh unsigned one would name a replay as a new
	// event. Svix sends both families with the same values.
	other := "svix-"
	if prefix == "svix-" {
		other = "webhook-"
	}
	for _, f := range [][2]string{{"id", id}, {"timestamp", ts}} {
		if vs := r.Header.Values(other + f[0]); len(vs) > 0 && (len(vs) > 1 || vs[0] != f[1]) {
			return fail(sc, ErrMalformed, other+f[0]+" differs from the signed "+prefix+f[0])
		}
	}
	entries, err := splitList(sc, prefix+"signature", sig, " ")
	if err != nil {
		return err
	}
	var v1 [][]byte
	for _, e := range entries {
		ver, s, ok := strings.Cut(e, ",")
		if ok && ver == "v1" { // v1a (ed25519) and future versions are skipped
			v1 = append(v1, []byte(s))
		}
	}
	if len(v1) == 0 {
		return fail(sc, ErrMalformed, "no v1 entry in "+prefix+"signature")
	}
	if err := checkFresh(sc, ts, r.Now, v.tol); err != nil {
		return err
	}
	for _, k := range v.keys {
		want := standardMAC(k, id, ts, r.Body)
		for _, got := range v1 {
			if hmac.Equal(want, got) {
				return nil
			}
		}
	}
	return fail(sc, ErrMismatch, "no v1 signature matches any secret")
}

func signStandard(p Params, body []byte, now time.Time, msgID string) (http.Header, []byte, error) {
	if msgID == "" {
		return nil, nil, errors.New("message id is empty")
	}
	key, err := StandardKey(p.Secrets[0])
	if err != nil {
		return nil, nil, err
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	h := http.Header{}
	h.Set("webhook-id", msgID)
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", "v1,"+string(standardMAC(key, msgID, ts, body)))
	return h, nil, nil
}

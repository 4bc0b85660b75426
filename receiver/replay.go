package receiver

import (
	"crypto/sha256"
	"net/http"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/signature"
)

// guard asks the store for the replay checks the source's signature needs:
// the body-replay check on what the signature covers, and the one-time
// token a verifier handed out. It runs before the events are extracted.
func (rc *Receiver) guard(src *Source, vreq *signature.Request, rec *hookwarden.Receipt) {
	rec.BodyReplayCheck = src.BodyReplayCheck
	if vreq.Signed != nil {
		// The signature covers data derived from the bytes (Twilio's
		// sorted parameters): the receipt and its event are keyed on that,
		// so a re-encoded copy is the same body to the replay check, the
		// quarantine and the divergent-duplicate test.
		rec.BodySHA256 = *vreq.Signed
	}
	if t := vreq.Token; t != nil {
		rec.Token = &hookwarden.Token{SHA256: sha256.Sum256([]byte(t.Value)), Expires: t.Expires}
	}
}

// replayed answers a request whose one-time token the store had seen with
// another body: refused like a bad signature, and nothing was recorded.
func (rc *Receiver) replayed(w http.ResponseWriter, r *http.Request, src *Source) string {
	reason := signature.Reason(signature.ErrReplayed)
	rc.opts.Observer.Unauthorized(src.Name, reason)
	rc.opts.Logger.Warn("request refused", "source", src.Name, "reason", reason, "remote", rc.remoteAddr(r))
	answer(w, http.StatusUnauthorized, "unauthorized")
	return "unauthorized"
}

package receiver

import (
	"crypto/sha256"
	"net/http"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/signature"
)

// guard asks the store for the replay checks the source's signature needs:
// the body-replay check, and the one-time token a verifier handed out.
func (rc *Receiver) guard(src *Source, vreq *signature.Request, rec *hookwarden.Receipt) {
	rec.BodyReplayCheck = src.BodyReplayCheck
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

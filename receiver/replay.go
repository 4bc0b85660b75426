package receiver

import (
	"context"
	"crypto/sha256"
	"net/http"
	"time"

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

// TokenReader reads a one-time token the store recorded. The receiver asks
// it before extracting anything or running a filter, so a captured Mailgun
// signature block sent with forged bodies costs a read, not a decode per
// filter. The Recorder's unique insert, in the receipt's transaction, still
// decides: this read only refuses early what that insert would refuse.
type TokenReader interface {
	// SeenToken returns the hash of the body the token was recorded with,
	// if a row for it exists that expires after at.
	SeenToken(ctx context.Context, source string, token [32]byte, at time.Time) (body [32]byte, found bool, err error)
}

// knownReplay reports whether rec's one-time token is already recorded,
// unexpired, with another body. A failed read says no: the commit decides.
func (rc *Receiver) knownReplay(ctx context.Context, src *Source, rec *hookwarden.Receipt) bool {
	if rec.Token == nil || rc.opts.Tokens == nil {
		return false
	}
	// Bounded like the commit: a hung store must not hold the request here.
	ctx, cancel := context.WithTimeout(ctx, rc.opts.CommitTimeout)
	defer cancel()
	body, found, err := rc.opts.Tokens.SeenToken(ctx, src.Name, rec.Token.SHA256, rec.ReceivedAt)
	if err != nil {
		rc.opts.Logger.Debug("read seen token; the commit decides", "source", src.Name, "err", err)
		return false
	}
	return found && body != rec.BodySHA256
}

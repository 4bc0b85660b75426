package receiver

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"io"
	"mime"
	"net/http"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/batch"
	"github.com/hookwarden/hookwarden/internal/extract"
	"github.com/hookwarden/hookwarden/internal/filter"
	"github.com/hookwarden/hookwarden/internal/signature"
)

// The platforms that never replay (SPEC 11): their handshakes are answered
// at the door, their batches split into one event each, and the answer is
// the one the platform waits for.

// HandshakeObserver is an optional part of an Observer: it is told of each
// handshake answered (or refused) at the door.
type HandshakeObserver interface {
	Handshake(source, kind, outcome string)
}

// Handshake outcomes, the values of the outcome label of
// hookwarden_handshakes_total.
const (
	HandshakeAnswered = "answered"
	HandshakeRefused  = "refused"
)

// maxToken bounds what a handshake echoes (Graph's validationToken, Meta's
// challenge, X's crc_token): the answer to an unauthenticated request stays
// small.
const maxToken = 1 << 10

func (rc *Receiver) handshake(src *Source, r *http.Request, kind, outcome string) {
	if h, ok := rc.opts.Observer.(HandshakeObserver); ok {
		h.Handshake(src.Name, kind, outcome)
	}
	log := rc.opts.Logger.Info
	if outcome != HandshakeAnswered {
		log = rc.opts.Logger.Warn
	}
	log("handshake", "source", src.Name, "kind", kind, "outcome", outcome, "remote", rc.remoteAddr(r))
}

// plain answers a handshake with the platform's text: text/plain, never
// sniffed as HTML.
func plain(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, text)
}

func jsonAnswer(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// handshakeBefore answers the handshakes that come before any signature:
// Meta's and X's GET, Graph's validationToken POST. ok false: not one.
func (rc *Receiver) handshakeBefore(w http.ResponseWriter, r *http.Request, src *Source) (string, bool) {
	switch {
	case src.Scheme == "meta" && r.Method == http.MethodGet:
		q := r.URL.Query()
		challenge := q.Get("hub.challenge")
		token := []byte(q.Get("hub.verify_token"))
		if src.VerifyToken == "" || q.Get("hub.mode") != "subscribe" || challenge == "" || len(challenge) > maxToken ||
			subtle.ConstantTimeCompare(token, []byte(src.VerifyToken)) != 1 {
			rc.handshake(src, r, "verify", HandshakeRefused)
			answer(w, http.StatusForbidden, "forbidden")
			return "handshake", true
		}
		rc.handshake(src, r, "verify", HandshakeAnswered)
		plain(w, http.StatusOK, challenge)
		return "handshake", true
	case src.Scheme == "x" && r.Method == http.MethodGet:
		token := r.URL.Query().Get("crc_token")
		if token == "" || len(token) > maxToken || len(src.Secrets) == 0 {
			rc.handshake(src, r, "crc", HandshakeRefused)
			answer(w, http.StatusBadRequest, "bad_request")
			return "handshake", true
		}
		// The consumer secret in use is the first (several: rotation).
		rc.handshake(src, r, "crc", HandshakeAnswered)
		jsonAnswer(w, http.StatusOK, map[string]string{"response_token": signature.XCRCResponseToken(src.Secrets[0], token)})
		return "handshake", true
	case src.Scheme == "graph" && r.Method == http.MethodPost && r.URL.Query().Has("validationToken"):
		token := r.URL.Query().Get("validationToken") // URL-decoded, as Graph wants it back
		if token == "" || len(token) > maxToken {
			rc.handshake(src, r, "validation", HandshakeRefused)
			answer(w, http.StatusBadRequest, "bad_request")
			return "handshake", true
		}
		rc.handshake(src, r, "validation", HandshakeAnswered)
		plain(w, http.StatusOK, token)
		return "handshake", true
	}
	return "", false
}

// handshakeAfter answers the signed handshakes: Zoom's url_validation,
// Discord's PINGs, LINE's empty verify request, Viber's webhook callback.
// They are never events. ok false: not one.
func (rc *Receiver) handshakeAfter(w http.ResponseWriter, r *http.Request, src *Source, body []byte) (string, bool) {
	var v struct {
		Event   string `json:"event"`
		Payload struct {
			PlainToken string `json:"plainToken"`
		} `json:"payload"`
	}
	switch src.Scheme {
	case "zoom":
		if json.Unmarshal(body, &v) != nil || v.Event != "endpoint.url_validation" {
			return "", false
		}
		p := v.Payload.PlainToken
		if p == "" || len(p) > maxToken || len(src.Secrets) == 0 {
			rc.handshake(src, r, "url_validation", HandshakeRefused)
			answer(w, http.StatusBadRequest, "bad_request")
			return "handshake", true
		}
		rc.handshake(src, r, "url_validation", HandshakeAnswered)
		jsonAnswer(w, http.StatusOK, map[string]string{"plainToken": p, "encryptedToken": signature.ZoomEncryptedToken(src.Secrets[0], p)})
		return "handshake", true
	case "discord":
		var d struct {
			Type  *int            `json:"type"`
			ID    json.RawMessage `json:"id"`
			Event json.RawMessage `json:"event"`
		}
		if json.Unmarshal(body, &d) != nil || d.Type == nil || d.Event != nil {
			return "", false
		}
		switch {
		case *d.Type == 1 && d.ID != nil: // an interaction PING
			rc.handshake(src, r, "ping", HandshakeAnswered)
			jsonAnswer(w, http.StatusOK, map[string]int{"type": 1})
			return "handshake", true
		case *d.Type == 0 && d.ID == nil: // a Webhook Events PING
			rc.handshake(src, r, "ping", HandshakeAnswered)
			w.WriteHeader(http.StatusNoContent)
			return "handshake", true
		}
	case "line":
		if batch.EmptyArray(body, "events") {
			rc.handshake(src, r, "verify", HandshakeAnswered)
			answer(w, http.StatusOK, "ok")
			return "handshake", true
		}
	case "viber":
		if json.Unmarshal(body, &v) == nil && v.Event == "webhook" {
			rc.handshake(src, r, "webhook", HandshakeAnswered)
			answer(w, http.StatusOK, "ok")
			return "handshake", true
		}
	}
	return "", false
}

// split fills rec.Events from the source's splitter (SPEC 11, "One request,
// several events"): each event in the envelope that holds only it, its id
// the platform's (or derived), its type, destinations and filters read from
// its Doc. ok false: the source has no splitter.
func (rc *Receiver) split(src *Source, rec *hookwarden.Receipt, freq *filter.Request) bool {
	sp := src.Split
	if sp == nil && src.Batch {
		sp = batch.Array
	}
	if sp == nil {
		return false
	}
	evs, err := sp(rec.Body)
	if err != nil {
		rec.QuarantineReason = "body cannot be split into events: " + err.Error()
		return true
	}
	var missing int
	for _, e := range evs {
		doc := extract.ValidBody(e.Doc)
		var ev hookwarden.Event
		var err error
		derived := e.Derived
		if e.Body == nil {
			// The request is the event: the source's event_id (the preset's,
			// or the operator's own) decides, the splitter's id only where it
			// finds none (a Discord Webhook Event: derived).
			if ev, err = rc.event(src, rec.Header, doc, freq, ""); err == nil {
				derived = false
			}
		}
		if e.Body != nil || err != nil {
			ev, err = rc.event(src, rec.Header, doc, freq, e.ID)
		}
		if err != nil {
			missing++
			continue
		}
		ev.Body = e.Body
		ev.Derived = derived
		if ev.Type == "" {
			ev.Type = e.Type
		}
		// The event's own bytes: a retry whose envelope changed around an
		// unchanged event (Meta's entry.time is the send time) is not
		// divergent.
		ev.BodySHA256 = sha256.Sum256(e.Own)
		if e.Body == nil {
			ev.BodySHA256 = rec.BodySHA256
		}
		rec.Events = append(rec.Events, ev)
	}
	switch {
	case len(rec.Events) == 0 && len(evs) == 0:
		rec.QuarantineReason = "the request carries no event"
	case len(rec.Events) == 0:
		rec.QuarantineReason = "no event of the batch has an event id"
	case missing > 0:
		rc.opts.Logger.Warn("batch elements without event id were skipped", "source", src.Name, "skipped", missing)
	}
	return true
}

// counts is the answer to a request of several events: how many it carried,
// how many were new, how many claimed before.
type counts struct {
	Status    string `json:"status"`
	Events    int    `json:"events"`
	Accepted  int    `json:"accepted"`
	Duplicate int    `json:"duplicate"`
}

// answerRecorded writes the answer to a committed request: the one the
// platform waits for (Discord's deferred response or 204, Slack's empty
// 200 to form bodies, Graph's 202), the counts of a batch, else the
// small JSON body.
func (rc *Receiver) answerRecorded(w http.ResponseWriter, r *http.Request, src *Source, rec *hookwarden.Receipt, res hookwarden.RecordResult) {
	if res.Outcome != hookwarden.Quarantined {
		switch src.Scheme {
		case "discord":
			if len(rec.Events) == 1 && rec.Events[0].Derived {
				w.WriteHeader(http.StatusNoContent) // a Webhook Event: 204, no body
				return
			}
			t := src.DeferredType
			if t == 0 {
				t = 5
			}
			// The app follows up with the interaction's token.
			jsonAnswer(w, http.StatusOK, map[string]int{"type": t})
			return
		case "slack":
			if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "application/x-www-form-urlencoded" {
				w.Header().Set("Cache-Control", "no-store")
				w.WriteHeader(http.StatusOK) // an empty body is Slack's acknowledgement
				return
			}
		}
	}
	code := http.StatusOK
	if src.Scheme == "graph" && res.Outcome != hookwarden.Quarantined {
		code = http.StatusAccepted // as Graph documents, once persisted
	}
	batched := false
	for i := range rec.Events {
		if rec.Events[i].Body != nil {
			batched = true
			break
		}
	}
	if !batched {
		answer(w, code, string(res.Outcome))
		return
	}
	c := counts{Status: string(res.Outcome), Events: len(res.Events)}
	for _, er := range res.Events {
		if er.Outcome == hookwarden.Accepted {
			c.Accepted++
		} else {
			c.Duplicate++
		}
	}
	jsonAnswer(w, code, c)
}

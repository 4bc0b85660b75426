package receiver

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"

	"github.com/hookwarden/hookwarden"
)

// ErrNoEventID: a recovered event's bytes carry no event id where the
// source's event_id looks for it.
var ErrNoEventID = errors.New("no event id")

// Recovered builds the receipt of an event a backfill recovered from the
// provider's API, for the Recorder: the source's event id and type
// extractors and its destinations' filters apply as to a live request, so
// it meets the same claim and gets the same jobs. No signature is checked:
// the bytes came from the provider's API, over TLS, with the operator's key.
// It is never quarantined: an event without an id fails with ErrNoEventID.
func (rc *Receiver) Recovered(source string, header http.Header, body []byte, remote string) (*hookwarden.Receipt, error) {
	src := (*rc.sources.Load())[source]
	if src == nil {
		return nil, fmt.Errorf("source %q: %w", source, hookwarden.ErrNotFound)
	}
	rec := &hookwarden.Receipt{
		Source:     src.Name,
		Header:     rc.redact(header),
		Body:       body,
		BodySHA256: sha256.Sum256(body),
		RemoteAddr: remote,
		ReceivedAt: rc.opts.Now(),
		Backfill:   true,
	}
	rc.events(src, rec)
	if len(rec.Events) != 1 || rec.Events[0].Body != nil {
		return nil, fmt.Errorf("%w (%s)", ErrNoEventID, rec.QuarantineReason)
	}
	return rec, nil
}

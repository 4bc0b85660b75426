package signature

import (
	"crypto/sha256"
	"time"
)

// Viber REST bot API: X-Viber-Content-Signature = hex HMAC-SHA256(bot auth
// token, raw body), no prefix, no timestamp. Source: Viber/viber-bot-python
// viber/api/api.py (its test vector is reproduced in internal/vectors).
//
// The "webhook" callback after set_webhook is the receiver's handshake. One
// event a request: event + message_token is the id (delivered and seen
// callbacks reuse the message's token), event the type. Callbacks without a
// message_token (conversation_started without one, subscribed) are
// quarantined for want of an id.

func init() {
	registerBodyMAC(bodyMAC{scheme: "viber", header: "X-Viber-Content-Signature", alg: sha256.New, hex: true}, Preset{
		EventID:   "json:event+json:message_token",
		EventType: "json:event",
		EventTime: "json:timestamp", // unix ms
		// "Viber will retry the callback several times for an hour".
		RetryHorizon: time.Hour,
	})
}

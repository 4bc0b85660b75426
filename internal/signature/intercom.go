package signature

import (
	"crypto/sha1"
	"time"
)

// Intercom: X-Hub-Signature = "sha1=" + hex HMAC-SHA1(the app's client
// secret, raw body); no timestamp. Source: developers.intercom.com
// signed-notifications ("the hexadecimal (40-byte) representation of a SHA-1
// signature ... starts with the string sha1="); the key being the client
// secret (older docs: hub_secret) is M.
//
// One notification a request: id (notif_...) is the id, topic the type. A
// retry's body differs (delivery_attempts), so it is signed anew.

func init() {
	registerBodyMAC(bodyMAC{scheme: "intercom", header: "X-Hub-Signature", prefix: "sha1=", alg: sha1.New, hex: true}, Preset{
		EventID:   "json:id",
		EventType: "json:topic",
		// No per-notification schedule is published; Intercom keeps an
		// erroring endpoint for up to 7 days before suspending it.
		RetryHorizon: 7 * 24 * time.Hour,
	})
}

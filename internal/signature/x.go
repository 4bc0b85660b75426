package signature

import (
	"crypto/sha256"
	"time"
)

// X (Twitter) Account Activity API: x-twitter-webhooks-signature = "sha256=" +
// base64 HMAC-SHA256(consumer secret as UTF-8, raw body). No timestamp.
// Sources: developer.x.com account-activity-api/guides/securing-webhooks;
// xdevplatform/account-activity-dashboard helpers/security.js (the CRC).
//
// The CRC (GET ?crc_token=T) is answered by the receiver with
// XCRCResponseToken.
//
// A request carries arrays of events (tweet_create_events, favorite_events,
// direct_message_events, follow_events, ...). EventID and EventType apply to
// one item, which the batch splitter hands them: id_str (tweets), else id
// (DMs, likes); the splitter joins the array's name to the id (one id can
// appear in two arrays) and takes the array's name as the type. Follows,
// blocks and mutes have no id: the splitter derives one.

func init() {
	registerBodyMAC(bodyMAC{scheme: "x", header: "X-Twitter-Webhooks-Signature", prefix: "sha256=", alg: sha256.New}, Preset{
		EventID:   "json:id_str|json:id",
		EventType: "json:type",
		// Enterprise: "up to three times over a five-minute period"; the
		// Replay API (5 days) is a redrive, covered by redrive_window.
		RetryHorizon: 10 * time.Minute,
	})
}

// XCRCResponseToken is the response_token of X's challenge-response check:
// "sha256=" + base64 HMAC-SHA256(consumer secret, crc_token). The receiver
// answers GET ?crc_token=T with {"response_token": XCRCResponseToken(s, T)}.
func XCRCResponseToken(consumerSecret, crcToken string) string {
	return "sha256=" + string(b64Of(mac256([]byte(consumerSecret), []byte(crcToken))))
}

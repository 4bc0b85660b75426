package signature

import (
	"crypto/sha256"
	"time"
)

// LINE Messaging API: x-line-signature = base64 HMAC-SHA256(channel secret as
// UTF-8, raw body), no prefix, no timestamp. Reissuing the channel secret
// ends the old one at once, so configure [new, old] only for the switch.
// Sources: developers.line.biz/en/docs/messaging-api/verify-webhook-signature;
// line/line-bot-sdk-go linebot/webhook/parse.go (the Python and Node SDKs'
// test vectors are reproduced in internal/vectors).
//
// A request carries events[] (empty for the console's verify request, which
// the receiver answers). EventID and EventType apply to one element of
// events[], which the batch splitter hands them: webhookEventId (a ULID, kept
// on redelivery, when deliveryContext.isRedelivery turns true and the body,
// hence the signature, changes) and type.

func init() {
	registerBodyMAC(bodyMAC{scheme: "line", header: "X-Line-Signature", alg: sha256.New}, Preset{
		EventID:   "json:webhookEventId",
		EventType: "json:type",
		EventTime: "json:timestamp", // unix ms
		// Redelivery (when enabled) has no published schedule; a week is
		// the research's guess for dedup memory, not a documented figure.
		RetryHorizon: 7 * 24 * time.Hour,
	})
}

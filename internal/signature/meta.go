package signature

import (
	"crypto/sha256"
	"time"
)

// Meta (WhatsApp Cloud API, Messenger, Instagram: one scheme for every Graph
// webhook): X-Hub-Signature-256 = "sha256=" + hex HMAC-SHA256(app secret as
// UTF-8, raw body). Meta escapes non-ASCII as \uXXXX before signing and sends
// those bytes, so only the raw body verifies (vector
// meta/reserialized_unescaped_body). The legacy SHA-1 X-Hub-Signature alone
// is refused. No timestamp. Sources: WhatsApp/WhatsApp-Nodejs-SDK
// src/api/webhooks.ts and src/utils.ts; fbsamples/graph-api-webhooks-samples.
//
// The GET hub.challenge handshake (verify_token) is answered by the receiver.
//
// One request carries many events. EventID and EventType apply to one event's
// own object, which the receiver's batch splitter hands them:
//   - WhatsApp entry[].changes[].value.messages[]: its id (a wamid);
//   - WhatsApp entry[].changes[].value.statuses[]: id + ":" + status (sent,
//     delivered, read and failed of one message are four events);
//   - Messenger and Instagram entry[].messaging[]: message.mid; the items
//     without one (postback, reaction, read, delivery) the splitter keys on
//     the item's kind (its member name) + timestamp + sender.id;
//   - any other change (entry[].changes[] of other fields): no id, the
//     splitter derives one from the SHA-256 of the event's bytes.
//
// The type is the message's type (text, image, ...) or the status.

func init() {
	registerBodyMAC(bodyMAC{scheme: "meta", header: "X-Hub-Signature-256", prefix: "sha256=", alg: sha256.New, hex: true,
		legacy: "X-Hub-Signature"}, Preset{
		EventID:   "json:message.mid|json:id+json:status|json:id",
		EventType: "json:type|json:status",
		// Per event: WhatsApp unix seconds (a string), Messenger and Instagram ms.
		EventTime: "json:timestamp",
		// WhatsApp retries "with decreasing frequency ... for up to 7 days"
		// (Graph webhooks in general: 36 h; Messenger until success).
		RetryHorizon: 7 * 24 * time.Hour,
	})
}

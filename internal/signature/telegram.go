package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"net/http"
	"time"
)

// Telegram Bot API: no signature. setWebhook's secret_token comes back in
// every request as X-Telegram-Bot-Api-Secret-Token; it is compared with each
// configured token in constant time (hashed first, so the time does not
// depend on the lengths either). The body is not covered: whoever holds the
// token can send anything, so keep it secret and the endpoint on HTTPS.
// Source: core.telegram.org/bots/api#setwebhook; tdlib/telegram-bot-api
// Client.cpp (the 1-256 characters A-Z a-z 0-9 _ - rule) and WebhookActor.cpp.
//
// One Update per request; update_id is its id. Ids are sequential per bot but
// re-randomized after a week without updates, so claims should not be kept
// much longer than that (retention per source is the receiver's concern).

func init() {
	register(&scheme{
		name: "telegram",
		preset: Preset{
			EventID: "json:update_id",
			// update_id grows by one per update: its holes are updates never received.
			Sequence: "json:update_id",
			// Messages carry their date (unix seconds); other updates none.
			EventTime: "json:message.date|json:edited_message.edit_date|json:channel_post.date",
			// No type: the update's kind is the name of its one optional
			// member (message, edited_message, callback_query, ...), a key
			// name, which an extract spec cannot read; config's default
			// json:type finds nothing and the type stays empty.
			EventType: "",
			// Updates are kept at most 24 h; the server retries until then.
			RetryHorizon: 24 * time.Hour,
		},
		build: buildTelegram,
		sign: func(p Params, _ []byte, _ time.Time, _ string) (http.Header, []byte, error) {
			h := http.Header{}
			h.Set(telegramHeader, p.Secrets[0])
			return h, nil, nil
		},
	})
}

const telegramHeader = "X-Telegram-Bot-Api-Secret-Token"

type telegramVerifier struct{ tokens [][32]byte }

// validTelegramToken is setWebhook's rule for secret_token.
func validTelegramToken(s string) bool {
	if len(s) < 1 || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func buildTelegram(p Params) (Verifier, error) {
	v := &telegramVerifier{}
	for i, s := range p.Secrets {
		if !validTelegramToken(s) {
			return nil, secretErr(i, "a Telegram secret_token is 1-256 characters of A-Z, a-z, 0-9, _ and -")
		}
		v.tokens = append(v.tokens, sha256.Sum256([]byte(s)))
	}
	return v, nil
}

func (v *telegramVerifier) Verify(r *Request) error {
	const sc = "telegram"
	got, err := header(sc, r.Header, telegramHeader)
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(got))
	for _, t := range v.tokens {
		if hmac.Equal(sum[:], t[:]) {
			return nil
		}
	}
	return fail(sc, ErrMismatch, telegramHeader+" matches no secret")
}

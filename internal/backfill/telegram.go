package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Telegram keeps no history to recover from: an update not delivered
// within 24 h is gone. What it does tell is its own view of the webhook:
// getWebhookInfo's pending_update_count (updates it still holds and keeps
// retrying), last_error_date and last_error_message (why its last delivery
// failed). Read by `backfill SOURCE --status`, outside the receive path:
// one GET, bounded in time and size, https only except on loopback. The
// bot token is in the URL's path (Telegram's Bot API has no other form),
// so no error here ever quotes the URL.
// Source: core.telegram.org/bots/api#getwebhookinfo.

// TelegramBase is the Bot API's address.
const TelegramBase = "https://api.telegram.org"

// telegramStatusMax bounds the answer: a WebhookInfo is a few hundred bytes.
const telegramStatusMax = 1 << 20

// TelegramStatus is the part of getWebhookInfo that says what Telegram has
// not delivered.
type TelegramStatus struct {
	URL                string    `json:"url"`
	PendingUpdateCount int64     `json:"pending_update_count"`
	LastErrorDate      time.Time `json:"last_error_date,omitzero"` // zero: no error reported
	LastErrorMessage   string    `json:"last_error_message,omitempty"`
}

// TelegramWebhookInfo reads getWebhookInfo with the bot token o.APIKey.
// A token Telegram refuses (401, or 404 for one of the wrong form) wraps
// ErrKeyRefused. MaxTime bounds the call (default here 30 s).
func TelegramWebhookInfo(ctx context.Context, o Options) (TelegramStatus, error) {
	var st TelegramStatus
	if o.MaxTime <= 0 {
		o.MaxTime = 30 * time.Second
	}
	c, err := newClient("telegram", TelegramBase, 0, o, func(*http.Request) {})
	if err != nil {
		return st, err
	}
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + "/bot" + c.o.APIKey + "/getWebhookInfo"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return st, errors.New("telegram: build request (the bot token has characters a URL path cannot hold)")
	}
	resp, err := c.o.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which holds the token
		}
		return st, fmt.Errorf("telegram getWebhookInfo: %w", ctxErr(ctx, err))
	}
	data, rerr := readCapped(resp.Body, telegramStatusMax)
	resp.Body.Close()
	var ans struct {
		OK          bool   `json:"ok"`
		Description string `json:"description"`
		Result      struct {
			URL                string `json:"url"`
			PendingUpdateCount int64  `json:"pending_update_count"`
			LastErrorDate      int64  `json:"last_error_date"`
			LastErrorMessage   string `json:"last_error_message"`
		} `json:"result"`
	}
	jerr := json.Unmarshal(data, &ans)
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusNotFound:
		return st, fmt.Errorf("telegram answered %d (%s): %w", resp.StatusCode, ans.Description, ErrKeyRefused)
	case rerr != nil:
		return st, fmt.Errorf("telegram getWebhookInfo: %w", rerr)
	case resp.StatusCode != http.StatusOK || jerr != nil || !ans.OK:
		return st, &StatusError{Status: resp.StatusCode, Message: ans.Description}
	}
	st = TelegramStatus{URL: ans.Result.URL, PendingUpdateCount: ans.Result.PendingUpdateCount, LastErrorMessage: ans.Result.LastErrorMessage}
	if ans.Result.LastErrorDate > 0 {
		st.LastErrorDate = time.Unix(ans.Result.LastErrorDate, 0).UTC()
	}
	return st, nil
}

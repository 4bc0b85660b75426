package backfill

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// getWebhookInfo read from a fake Bot API on loopback: the pending count
// and the last error; a refused token wraps ErrKeyRefused; no error quotes
// the token; a non-loopback http base is refused; the call is bounded.
func TestTelegramWebhookInfo(t *testing.T) {
	const token = "123456:ABC-secret_token"
	var hang = make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bot" + token + "/getWebhookInfo":
			w.Write([]byte(`{"ok":true,"result":{"url":"https://hooks.example.com/hooks/tg","has_custom_certificate":false,` +
				`"pending_update_count":37,"last_error_date":1765150000,"last_error_message":"Connection refused","max_connections":40}}`))
		case "/botslow/getWebhookInfo":
			<-hang
		default:
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"ok":false,"error_code":401,"description":"Unauthorized"}`))
		}
	}))
	defer srv.Close()
	defer close(hang)
	st, err := TelegramWebhookInfo(context.Background(), Options{APIBase: srv.URL, APIKey: token})
	if err != nil {
		t.Fatal(err)
	}
	if st.PendingUpdateCount != 37 || st.LastErrorMessage != "Connection refused" || !st.LastErrorDate.Equal(time.Unix(1765150000, 0)) ||
		st.URL != "https://hooks.example.com/hooks/tg" {
		t.Fatalf("status %+v", st)
	}
	_, err = TelegramWebhookInfo(context.Background(), Options{APIBase: srv.URL, APIKey: "999:wrong"})
	if !errors.Is(err, ErrKeyRefused) || strings.Contains(err.Error(), "999:wrong") {
		t.Fatalf("wrong token: %v, want ErrKeyRefused without the token", err)
	}
	_, err = TelegramWebhookInfo(context.Background(), Options{APIBase: srv.URL, APIKey: "slow", MaxTime: 200 * time.Millisecond})
	if !errors.Is(err, ErrTimeBound) || strings.Contains(err.Error(), "slow") {
		t.Fatalf("hung API: %v, want the time bound, without the token", err)
	}
	if _, err := TelegramWebhookInfo(context.Background(), Options{APIBase: "http://api.example.com", APIKey: token}); !errors.Is(err, ErrInsecureBase) {
		t.Fatalf("http base off loopback: %v, want ErrInsecureBase", err)
	}
}

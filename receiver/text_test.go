package receiver_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/internal/extract"
	"github.com/hookwarden/hookwarden/internal/signature"
	"github.com/hookwarden/hookwarden/receiver"
)

// An event id that is not text (a NUL byte, invalid UTF-8: a header can
// carry any bytes) is held in quarantine with the reason, on every store
// alike (PostgreSQL cannot store either), instead of being claimed; a type
// that is not text is dropped (a missing type is allowed).
func TestEventIDsMustBeText(t *testing.T) {
	store := openStore(t)
	src := source(t, "f", signature.Params{Scheme: "none"})
	src.EventID, _ = extract.Parse("header:X-Id")
	src.EventType, _ = extract.Parse("header:X-Type")
	rc := receiver.New([]receiver.Source{src}, receiver.Options{Recorder: store,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for i, tc := range []struct{ id, typ, want string }{
		{"evt_ok", "t", "accepted"},
		{"evt\x00nul", "t", "quarantined"},
		{"evt_\xff", "t", "quarantined"},
		{"evt_type", "t\xfe", "accepted"},
	} {
		body := `{"n":` + string(rune('0'+i)) + `}` // distinct bodies: distinct held requests
		req := httptest.NewRequest(http.MethodPost, "/hooks/f", strings.NewReader(body))
		req.Header.Set("X-Id", tc.id)
		req.Header.Set("X-Type", tc.typ)
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, req)
		if w.Code != 200 || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("id %q type %q: %d %s, want 200 %s", tc.id, tc.typ, w.Code, w.Body, tc.want)
		}
	}
	var held int
	if err := store.DB().QueryRow(`SELECT count(*) FROM quarantine
		WHERE reason LIKE 'no event id found (%control characters)' OR reason LIKE 'no event id found (%not UTF-8)'`).Scan(&held); err != nil || held != 2 {
		t.Fatalf("held, with the reason, for their id: %d (%v), want 2", held, err)
	}
	var typ string
	if err := store.DB().QueryRow(`SELECT event_type FROM events WHERE event_id = 'evt_type'`).Scan(&typ); err != nil || typ != "" {
		t.Fatalf("type of evt_type %q (%v), want empty", typ, err)
	}
}

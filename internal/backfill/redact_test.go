package backfill

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A provider that quotes the request's Authorization header in its error
// body (401, 403 or another 4xx) gets no part of the key into the error:
// the caller prints it and stores it as the run's error.
func TestErrorsNeverHoldTheKey(t *testing.T) {
	const key = "sk_test_EchoedKey51Zz"
	for _, status := range []int{401, 403, 400, 500} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"message":"bad request, you sent Authorization: %s (%s)"}`, r.Header.Get("Authorization"), r.URL.RawQuery)
		}))
		o := testOptions(srv.URL, key)
		o.MaxAttempts = 2
		ctx := context.Background()
		from, to := testNow.Add(-time.Hour), testNow
		var errs []error
		if s, err := NewStripe(StripeConfig{Options: o}); err == nil {
			_, err = s.List(ctx, from, to, func(Event) error { return nil })
			errs = append(errs, err)
		}
		if p, err := NewPaddle(PaddleConfig{Options: o}); err == nil {
			_, err = p.List(ctx, from, to, func(Event) error { return nil })
			errs = append(errs, err)
		}
		if g, err := NewGitHub(GitHubConfig{Options: o, Hook: "repos/a/b/hooks/1"}); err == nil {
			_, err = g.Redeliver(ctx, from, to, func(string) (bool, error) { return false, nil })
			errs = append(errs, err)
		}
		if v, err := NewSvix(SvixConfig{Options: o, App: "app_1", Endpoint: "ep_1"}); err == nil {
			_, err = v.Redeliver(ctx, from, to, nil)
			errs = append(errs, err)
		}
		srv.Close()
		if len(errs) != 4 {
			t.Fatalf("%d: %d providers built, want 4", status, len(errs))
		}
		for i, err := range errs {
			if err == nil {
				t.Fatalf("%d: provider %d: no error", status, i)
			}
			if msg := err.Error(); strings.Contains(msg, "EchoedKey51") {
				t.Errorf("%d: provider %d: the key in the error: %s", status, i, msg)
			}
			var se *StatusError
			if errors.As(err, &se) && strings.Contains(se.Message, "EchoedKey51") {
				t.Errorf("%d: provider %d: the key in StatusError.Message: %s", status, i, se.Message)
			}
			if (status == 401 || status == 403) && !errors.Is(err, ErrKeyRefused) {
				t.Errorf("%d: provider %d: %v, want ErrKeyRefused kept", status, i, err)
			}
		}
	}
	if got := Redact("Basic "+"c2tfdGVzdF9FY2hvZWRLZXk1MVp6Og==", key); strings.Contains(got, "c2tf") {
		t.Errorf("basic form not redacted: %s", got)
	}
}

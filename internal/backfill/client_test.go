package backfill

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := testNow
	cases := []struct {
		h    map[string]string
		want time.Duration
		ok   bool
	}{
		{map[string]string{"Retry-After": "7"}, 7 * time.Second, true},
		{map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, true},
		{map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0, true},
		{map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(now.Add(time.Minute).Unix(), 10)}, time.Minute, true},
		{map[string]string{"X-RateLimit-Remaining": "12", "X-RateLimit-Reset": "1"}, 0, false},
		{map[string]string{"Retry-After": "soon"}, 0, false},
		{nil, 0, false},
	}
	for i, c := range cases {
		h := http.Header{}
		for k, v := range c.h {
			h.Set(k, v)
		}
		got, ok := retryAfter(h, now)
		if got != c.want || ok != c.ok {
			t.Errorf("case %d %v: got %s %v, want %s %v", i, c.h, got, ok, c.want, c.ok)
		}
	}
}

func TestNextLink(t *testing.T) {
	cases := map[string]string{
		``: ``,
		`<https://a/x?cursor=1>; rel="next", <https://a/x>; rel="first"`: `https://a/x?cursor=1`,
		`<https://a/x>; rel="first", <https://a/x?c=2>; rel=next`:        `https://a/x?c=2`,
		`<https://a/x?q=a,b>; rel="prev next"`:                           `https://a/x?q=a,b`,
		`<https://a/x>; rel="prev"`:                                      ``,
	}
	for in, want := range cases {
		got, err := nextLink(in)
		if err != nil || got != want {
			t.Errorf("%q: got %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`https://a/x; rel=next`, `<https://a/x; rel=next`, `<>; rel=next`} {
		if _, err := nextLink(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestMessage(t *testing.T) {
	cases := map[string]string{
		`{"error":{"type":"invalid_request_error","message":"Invalid API Key provided"}}`: "Invalid API Key provided",
		`{"message":"Bad credentials","documentation_url":"x"}`:                           "Bad credentials",
		`{"error":{"code":"forbidden","detail":"not permitted"}}`:                         "not permitted",
		`plain`: "plain",
	}
	for in, want := range cases {
		if got := message([]byte(in)); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

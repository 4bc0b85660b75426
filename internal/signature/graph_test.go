package signature

import (
	"errors"
	"net/http"
	"testing"
)

// Every item of a Graph notification must prove itself: one request may mix
// subscriptions, so one good clientState cannot carry a forged item.
func TestGraphEveryItemsClientState(t *testing.T) {
	t.Parallel()
	v, err := New(Params{Scheme: "graph", Secrets: []string{"old-state", "new-state"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body string
		want error
	}{
		{`{"value":[{"id":"1","clientState":"new-state"},{"id":"2","clientState":"old-state"}]}`, nil},
		{`{"value":[{"id":"1","clientState":"new-state"},{"id":"2","clientState":"forged"}]}`, ErrMismatch},
		{`{"value":[{"id":"1","clientState":"new-state"},{"id":"2"}]}`, ErrMissing},
		{`{"value":[{"id":"1","ClientState":"new-state"}]}`, ErrMissing}, // names match exactly
		{`{"value":[{"id":"1","clientState":""}]}`, ErrMissing},
		{`{"value":[{"id":"1","clientState":7}]}`, ErrMissing},
		{`{"value":[]}`, ErrMissing},
		{`{"value":{"clientState":"new-state"}}`, ErrMalformed},
		{`[{"clientState":"new-state"}]`, ErrMalformed},
		{`{"value":[{"clientState":"new-state"}]`, ErrMalformed},
	} {
		err := v.Verify(&Request{Header: http.Header{}, Body: []byte(tc.body), Now: t0})
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.body, err, tc.want)
		}
	}
}

package receiver

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// stepReader returns at most step bytes per Read, as a slow network does.
type stepReader struct {
	r    io.Reader
	step int
}

func (s *stepReader) Read(p []byte) (int, error) {
	if len(p) > s.step {
		p = p[:s.step]
	}
	return s.r.Read(p)
}

// FuzzReadBody: whatever the body, its length, whether it is declared and
// how it is cut into reads, readBody returns exactly the bytes sent, or
// too-large past the limit, or errBudget past the budget (only when the
// body could need it: three times its size while a buffer grows, besides a
// pooled buffer and the headers); it never holds less budget than the
// bytes it returned, and the buffer it returns is not the pooled one.
func FuzzReadBody(f *testing.F) {
	f.Add([]byte(`{"id":"x"}`), true, uint16(7), uint16(3000), uint32(1<<20))
	f.Add(bytes.Repeat([]byte("a"), 5000), false, uint16(1000), uint16(40000), uint32(32<<10))
	f.Add(bytes.Repeat([]byte("b"), 40000), true, uint16(4096), uint16(65535), uint32(16<<10))
	f.Add([]byte{}, false, uint16(1), uint16(1), uint32(1))
	f.Fuzz(func(t *testing.T, data []byte, declared bool, step, limit uint16, max uint32) {
		if step == 0 || limit == 0 || max == 0 {
			return
		}
		rc := New(nil, Options{Recorder: nopRecorder{}, MaxBodyBytes: int64(limit), MaxInflightBytes: int64(max),
			MaxInflightPerClient: int64(max), Logger: slog.New(slog.DiscardHandler)})
		req := httptest.NewRequest(http.MethodPost, "/hooks/x", nil)
		req.Body = io.NopCloser(&stepReader{r: bytes.NewReader(data), step: int(step)})
		req.ContentLength = -1
		if declared {
			req.ContentLength = int64(len(data))
		}
		h := &hold{b: &rc.budget}
		body, err := rc.readBody(httptest.NewRecorder(), req, h)
		held := h.n
		defer func() {
			h.release()
			if n := rc.InflightBytes(); n != 0 {
				t.Fatalf("budget holds %d after release", n)
			}
		}()
		if held > int64(max) {
			t.Fatalf("held %d of a budget of %d", held, max)
		}
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			if len(data) <= int(limit) {
				t.Fatalf("%d bytes refused as over the limit %d", len(data), limit)
			}
		case errors.Is(err, errBudget), errors.Is(err, errClientShare):
			if int64(3*len(data)+maxPooled+1024) < int64(max) && len(data) <= int(limit) {
				t.Fatalf("%d bytes refused by a budget of %d", len(data), max)
			}
		case err != nil:
			t.Fatalf("unexpected error: %v", err)
		default:
			if !bytes.Equal(body, data) {
				t.Fatalf("read %d bytes, sent %d", len(body), len(data))
			}
			if int64(len(body)) > held && len(body) > 0 {
				t.Fatalf("%d bytes returned holding %d of budget", len(body), held)
			}
			if cap(body) != len(body) {
				t.Fatalf("body cap %d for len %d: not the exact-size copy", cap(body), len(body))
			}
		}
	})
}

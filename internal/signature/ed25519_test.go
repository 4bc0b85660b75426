package signature

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

// Discord and Telnyx verify with the platform's public key: a test signs
// with its own key pair (SignEd25519) and configures the public half;
// Sign refuses, since no configured secret can sign.
func TestEd25519Schemes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		scheme string
		enc    func([]byte) string
	}{
		{"discord", hex.EncodeToString},
		{"telnyx", base64.StdEncoding.EncodeToString},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			t.Parallel()
			pubA, privA, _ := ed25519.GenerateKey(rand.Reader)
			pubB, privB, _ := ed25519.GenerateKey(rand.Reader)
			_, privC, _ := ed25519.GenerateKey(rand.Reader)
			p := Params{Scheme: tc.scheme, Secrets: []string{tc.enc(pubA), tc.enc(pubB)}}
			if _, err := Sign(p, []byte("{}"), t0, ""); err == nil || !strings.Contains(err.Error(), "public key") {
				t.Fatalf("Sign: got %v, want a refusal naming the public key", err)
			}
			v, err := New(p)
			if err != nil {
				t.Fatal(err)
			}
			body := []byte(`{"id":"1","type":2,"data":{"id":"d1","event_type":"message.received"}}`)
			for i, priv := range []ed25519.PrivateKey{privA, privB, privC} {
				h, err := SignEd25519(tc.scheme, priv, body, t0)
				if err != nil {
					t.Fatal(err)
				}
				err = v.Verify(&Request{Header: h, Body: body, Now: t0})
				if i < 2 && err != nil || i == 2 && !errors.Is(err, ErrMismatch) {
					t.Errorf("key %d: got %v", i, err)
				}
				if i == 0 {
					tampered := append([]byte(nil), body...)
					tampered[3] ^= 1
					if err := v.Verify(&Request{Header: h, Body: tampered, Now: t0}); !errors.Is(err, ErrMismatch) {
						t.Errorf("tampered body: got %v, want ErrMismatch", err)
					}
				}
			}
			pre, _ := PresetFor(tc.scheme)
			for _, age := range []time.Duration{pre.Tolerance + time.Minute, -pre.Tolerance - time.Minute} {
				h, _ := SignEd25519(tc.scheme, privA, body, t0.Add(-age))
				if err := v.Verify(&Request{Header: h, Body: body, Now: t0}); !errors.Is(err, ErrStale) {
					t.Errorf("signed %s ago: got %v, want ErrStale", age, err)
				}
			}
			// A key of another encoding or length names the secret's index.
			if _, err := New(Params{Scheme: tc.scheme, Secrets: []string{tc.enc(pubA), "00ff"}}); err == nil ||
				!strings.Contains(err.Error(), "secrets[1]") {
				t.Errorf("short key: got %v, want an error naming secrets[1]", err)
			}
			var se *SecretError
			if _, err := New(Params{Scheme: tc.scheme, Secrets: []string{"zz"}}); !errors.As(err, &se) || se.Index != 0 {
				t.Errorf("bad key: got %v, want a SecretError for index 0", err)
			}
		})
	}
	if _, err := SignEd25519("stripe", make(ed25519.PrivateKey, ed25519.PrivateKeySize), nil, t0); err == nil {
		t.Error("SignEd25519(stripe): got nil error")
	}
}

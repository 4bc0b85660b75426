// Package vectors holds Hookwarden's signature test vectors, embedded so the
// signature and receiver tests read the very same file with no path outside
// the repository. The file is written by ./gen (make vectors) from code that
// shares nothing with internal/signature, plus the providers' published
// examples copied as data; never edit it by hand.
package vectors

//go:generate go run ./gen -out testdata/vectors.json

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
)

//go:embed testdata/vectors.json
var raw []byte

// messaging holds the messaging platforms' vectors (issue 47), copied
// verbatim from the research (its vectors/messaging_vectors.json, written and
// self-checked by its own Python generator with an independent verifier):
// a JSON list in the same fields, plus method, query and response for the
// handshakes. Never edit it by hand; copy a new version whole.
//
//go:embed testdata/messaging_vectors.json
var messaging []byte

// Min is the number of vectors the file holds today. Tests fail when they ran
// fewer, so a truncated file or a loop that skips cannot pass silently. Raise
// it with the generator; never lower it without saying why in the commit.
const Min = 95

// MinMessaging is the number of messaging vectors (10 of them published
// examples); same rule as Min.
const MinMessaging = 57

// Vector is one request and the verdict a correct verifier must reach.
type Vector struct {
	Provider string `json:"provider"`
	Case     string `json:"case"`
	// Secret is a string, or a list of strings when the receiver holds
	// several (rotation); see Secrets.
	Secret         json.RawMessage `json:"secret"`
	SecretEncoding string          `json:"secret_encoding"`
	// Timestamp is the signed time the request carries (unix s), nil when
	// the scheme signs none.
	Timestamp *int64 `json:"timestamp"`
	// Now is the verifier's clock (unix s); nil means no freshness check.
	Now *int64 `json:"now"`
	// ToleranceS is the replay window to configure; nil means the preset's.
	ToleranceS *int64            `json:"tolerance_s"`
	Headers    map[string]string `json:"headers"`
	Body       string            `json:"body"` // exact bytes, no trailing newline
	Expected   string            `json:"expected"`
	Reason     string            `json:"reason"`
	Source     string            `json:"source"`
	URL        string            `json:"url,omitempty"` // twilio: the URL the provider called

	// Handshakes (messaging file only): a request answered at the door,
	// not an event. Method is "" for an ordinary signed POST.
	Method   string    `json:"method,omitempty"`
	Query    string    `json:"query,omitempty"`
	Response *Response `json:"response,omitempty"`
}

// Response is the answer a platform expects to a handshake or, for Discord,
// to a verified request.
type Response struct {
	Status      int     `json:"status"`
	ContentType *string `json:"content_type"` // nil: no body, no content type
	Body        string  `json:"body"`
}

// Name is provider/case, unique in the file.
func (v Vector) Name() string { return v.Provider + "/" + v.Case }

// Secrets returns the secret as a list (empty for a null secret: a
// handshake that involves none).
func (v Vector) Secrets() ([]string, error) {
	if string(v.Secret) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(v.Secret, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(v.Secret, &many); err != nil {
		return nil, fmt.Errorf("%s: secret is neither a string nor a list: %w", v.Name(), err)
	}
	return many, nil
}

// Raw returns the embedded file as committed.
func Raw() []byte { return raw }

// Load parses the embedded file and refuses one that holds fewer than Min
// vectors or a repeated name.
func Load() ([]Vector, error) {
	var f struct {
		Vectors []Vector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("parse vectors: %w", err)
	}
	if len(f.Vectors) < Min {
		return nil, fmt.Errorf("vectors: file holds %d vectors, want at least %d", len(f.Vectors), Min)
	}
	seen := make(map[string]bool, len(f.Vectors))
	for _, v := range f.Vectors {
		if seen[v.Name()] {
			return nil, errors.New("vectors: " + v.Name() + " appears twice")
		}
		seen[v.Name()] = true
	}
	return f.Vectors, nil
}

// LoadMessaging parses the embedded messaging vectors and refuses a file
// that holds fewer than MinMessaging or a repeated name.
func LoadMessaging() ([]Vector, error) {
	var vs []Vector
	if err := json.Unmarshal(messaging, &vs); err != nil {
		return nil, fmt.Errorf("parse messaging vectors: %w", err)
	}
	if len(vs) < MinMessaging {
		return nil, fmt.Errorf("vectors: messaging file holds %d vectors, want at least %d", len(vs), MinMessaging)
	}
	seen := make(map[string]bool, len(vs))
	for _, v := range vs {
		if seen[v.Name()] {
			return nil, errors.New("vectors: messaging " + v.Name() + " appears twice")
		}
		seen[v.Name()] = true
	}
	return vs, nil
}

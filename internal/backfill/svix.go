package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// SvixConfig configures a Svix recover request. App and Endpoint are the
// sender's ids (app_…, ep_…) or uids.
type SvixConfig struct {
	Options
	App      string
	Endpoint string
}

// Svix asks POST /api/v1/app/{app}/endpoint/{endpoint}/recover to resend the
// window's failed messages. Svix does it in the background: the counts are
// unknown. Options.History is 0 (no clipping) unless set: retention depends
// on the sender's plan.
type Svix struct {
	c             *client
	app, endpoint string
}

var _ Redeliverer = (*Svix)(nil)

// NewSvix checks the config; api_base defaults to https://api.svix.com.
func NewSvix(cfg SvixConfig) (*Svix, error) {
	for _, v := range []struct{ name, s string }{{"app", cfg.App}, {"endpoint", cfg.Endpoint}} {
		if v.s == "" || strings.ContainsAny(v.s, "/?#%\\ ") || v.s == "." || v.s == ".." {
			return nil, fmt.Errorf("svix %s %q: want an id or uid", v.name, v.s)
		}
	}
	c, err := newClient("svix", "https://api.svix.com", 0, cfg.Options, func(r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+cfg.APIKey)
		r.Header.Set("Accept", "application/json")
	})
	if err != nil {
		return nil, err
	}
	return &Svix{c: c, app: cfg.App, endpoint: cfg.Endpoint}, nil
}

// Redeliver starts one recover task for [from, to]; claimed is not used
// (Svix does not say which messages it will resend).
func (s *Svix) Redeliver(ctx context.Context, from, to time.Time, _ func(id string) (bool, error)) (Report, error) {
	rep := Report{CountsUnknown: true}
	from, ok, err := s.c.window(from, to, &rep)
	if err != nil || !ok {
		return rep, err
	}
	if s.c.o.DryRun {
		return rep, nil
	}
	ctx, cancel := s.c.bounded(ctx)
	defer cancel()
	body, _ := json.Marshal(struct {
		Since string `json:"since"`
		Until string `json:"until"`
	}{from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano)})
	u := s.c.endpoint("/api/v1/app/"+s.app+"/endpoint/"+s.endpoint+"/recover", nil)
	resp, _, err := s.c.do(ctx, http.MethodPost, u, body)
	if err != nil {
		return rep, fmt.Errorf("svix: recover: %w", err)
	}
	rep.Pages = 1
	task, err := parseSvixRecover(resp)
	if err != nil {
		return rep, &PageError{Page: 1, Err: fmt.Errorf("svix: %w: %w", ErrMalformedPage, err)}
	}
	rep.Task = task
	return rep, nil
}

// parseSvixRecover reads the RecoverOut answer: {"id","status","task"}.
func parseSvixRecover(b []byte) (string, error) {
	var out struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return "", fmt.Errorf("recover answer: %w", err)
	}
	if out.ID == "" {
		return "", errors.New("recover answer: no task id")
	}
	return out.ID, nil
}

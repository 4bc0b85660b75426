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

// PaddleHistory is how long Paddle's events API keeps events.
const PaddleHistory = 90 * 24 * time.Hour

// PaddleConfig configures a Paddle lister. Sandbox: APIBase
// https://sandbox-api.paddle.com.
type PaddleConfig struct {
	Options
	Types []string // event_type filter; empty: all
}

// Paddle lists events with GET /events?per_page=200, following
// meta.pagination.next.
type Paddle struct {
	c   *client
	cfg PaddleConfig
}

var _ Lister = (*Paddle)(nil)

// NewPaddle checks the config; api_base defaults to https://api.paddle.com.
func NewPaddle(cfg PaddleConfig) (*Paddle, error) {
	c, err := newClient("paddle", "https://api.paddle.com", PaddleHistory, cfg.Options, func(r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	})
	if err != nil {
		return nil, err
	}
	return &Paddle{c: c, cfg: cfg}, nil
}

type paddlePage struct {
	Events  []Event
	Next    string // "" when there is no more
	HasMore bool
}

// parsePaddlePage parses {"data":[...],"meta":{"pagination":{...}}}; an event
// without event_id, event_type or occurred_at makes the page malformed.
func parsePaddlePage(b []byte) (paddlePage, error) {
	var raw struct {
		Data []json.RawMessage `json:"data"`
		Meta *struct {
			Pagination *struct {
				Next    string `json:"next"`
				HasMore bool   `json:"has_more"`
			} `json:"pagination"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return paddlePage{}, fmt.Errorf("list: %w", err)
	}
	if raw.Data == nil || raw.Meta == nil || raw.Meta.Pagination == nil {
		return paddlePage{}, errors.New(`list: want {"data":[...],"meta":{"pagination":{...}}}`)
	}
	p := paddlePage{HasMore: raw.Meta.Pagination.HasMore, Events: make([]Event, 0, len(raw.Data))}
	if p.HasMore {
		p.Next = raw.Meta.Pagination.Next
		if p.Next == "" {
			return paddlePage{}, errors.New("has_more with no next url")
		}
	}
	for i, d := range raw.Data {
		var ev struct {
			ID         string    `json:"event_id"`
			Type       string    `json:"event_type"`
			OccurredAt time.Time `json:"occurred_at"`
		}
		if err := json.Unmarshal(d, &ev); err != nil {
			return paddlePage{}, fmt.Errorf("data[%d]: %w", i, err)
		}
		if ev.ID == "" || ev.Type == "" || ev.OccurredAt.IsZero() {
			return paddlePage{}, fmt.Errorf("data[%d]: want an event with event_id, event_type and occurred_at", i)
		}
		p.Events = append(p.Events, Event{ID: ev.ID, Type: ev.Type, Created: ev.OccurredAt.UTC(), Body: append([]byte(nil), d...)})
	}
	return p, nil
}

// List walks the event list and yields the window's events. Paddle's list
// has no time filter, so the walk stops when a page goes past the window in
// the direction the list runs (seen from the occurred_at of the events: newest
// first stops before from, oldest first after to), or at the last page.
func (p *Paddle) List(ctx context.Context, from, to time.Time, yield func(Event) error) (Report, error) {
	var rep Report
	from, ok, err := p.c.window(from, to, &rep)
	if err != nil || !ok {
		return rep, err
	}
	ctx, cancel := p.c.bounded(ctx)
	defer cancel()
	q := url.Values{}
	q.Set("per_page", "200")
	if len(p.cfg.Types) > 0 {
		q.Set("event_type", strings.Join(p.cfg.Types, ","))
	}
	u := p.c.endpoint("/events", q)
	seen := map[string]bool{}
	dir := 0 // -1 newest first, +1 oldest first, 0 not known yet
	var prev time.Time
	for page := 1; ; page++ {
		cursor := u.Query().Get("after")
		if page > p.c.o.MaxPages {
			return rep, fmt.Errorf("paddle: %d pages read, window not finished (next cursor %s): %w", p.c.o.MaxPages, cursor, ErrPageBound)
		}
		body, _, err := p.c.do(ctx, http.MethodGet, u, nil)
		if err != nil {
			return rep, &PageError{Page: page, Cursor: cursor, Err: err}
		}
		pg, err := parsePaddlePage(body)
		if err != nil {
			return rep, &PageError{Page: page, Cursor: cursor, Err: fmt.Errorf("paddle: %w: %w", ErrMalformedPage, err)}
		}
		var nu *url.URL
		if pg.HasMore {
			if nu, err = p.c.link(pg.Next); err != nil {
				return rep, &PageError{Page: page, Cursor: cursor, Err: err}
			}
		}
		rep.Pages++
		done := false
		for _, e := range pg.Events {
			if dir == 0 && !prev.IsZero() && !e.Created.Equal(prev) {
				dir = 1
				if e.Created.Before(prev) {
					dir = -1
				}
			}
			prev = e.Created
			if (dir == -1 && e.Created.Before(from)) || (dir == 1 && e.Created.After(to)) {
				done = true
			}
			if e.Created.Before(from) || e.Created.After(to) || seen[e.ID] {
				continue
			}
			seen[e.ID] = true
			rep.Listed++
			if err := yield(e); err != nil {
				return rep, err
			}
		}
		if done || nu == nil {
			return rep, nil
		}
		if nu.String() == u.String() {
			return rep, &PageError{Page: page, Cursor: cursor, Err: fmt.Errorf("paddle: %w: the cursor does not move", ErrMalformedPage)}
		}
		u = nu
	}
}

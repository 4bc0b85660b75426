package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// StripeHistory is how long Stripe's events API keeps events.
const StripeHistory = 30 * 24 * time.Hour

// StripeConfig configures a Stripe lister.
type StripeConfig struct {
	Options
	Types      []string // types[] filter; empty: all
	APIVersion string   // when set, events of another api_version are failed, not yielded
}

// Stripe lists events with GET /v1/events (newest first, 100 a page).
type Stripe struct {
	c   *client
	cfg StripeConfig
}

var _ Lister = (*Stripe)(nil)

// NewStripe checks the config; api_base defaults to https://api.stripe.com.
func NewStripe(cfg StripeConfig) (*Stripe, error) {
	c, err := newClient("stripe", "https://api.stripe.com", StripeHistory, cfg.Options, func(r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	})
	if err != nil {
		return nil, err
	}
	return &Stripe{c: c, cfg: cfg}, nil
}

// stripePage is one page of GET /v1/events, parsed whole.
type stripePage struct {
	Events  []Event
	HasMore bool
}

// parseStripePage parses a list object; any event without an id, type or
// created makes the whole page malformed.
func parseStripePage(b []byte) (stripePage, error) {
	var raw struct {
		Object  string            `json:"object"`
		Data    []json.RawMessage `json:"data"`
		HasMore *bool             `json:"has_more"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return stripePage{}, fmt.Errorf("list: %w", err)
	}
	if raw.Object != "list" || raw.Data == nil || raw.HasMore == nil {
		return stripePage{}, errors.New(`list: want {"object":"list","data":[...],"has_more":...}`)
	}
	p := stripePage{HasMore: *raw.HasMore, Events: make([]Event, 0, len(raw.Data))}
	for i, d := range raw.Data {
		var ev struct {
			ID         string  `json:"id"`
			Object     string  `json:"object"`
			Type       string  `json:"type"`
			Created    *int64  `json:"created"`
			APIVersion *string `json:"api_version"`
		}
		if err := json.Unmarshal(d, &ev); err != nil {
			return stripePage{}, fmt.Errorf("data[%d]: %w", i, err)
		}
		if ev.ID == "" || ev.Type == "" || ev.Created == nil || (ev.Object != "" && ev.Object != "event") {
			return stripePage{}, fmt.Errorf("data[%d]: want an event with id, type and created", i)
		}
		e := Event{ID: ev.ID, Type: ev.Type, Created: time.Unix(*ev.Created, 0).UTC(), Body: append([]byte(nil), d...)}
		if ev.APIVersion != nil {
			e.APIVersion = *ev.APIVersion
		}
		p.Events = append(p.Events, e)
	}
	if p.HasMore && len(p.Events) == 0 {
		return stripePage{}, errors.New("has_more with no data: no cursor to go on")
	}
	return p, nil
}

// List walks the window newest first. created bounds are inclusive, in whole
// seconds (Stripe's resolution).
func (s *Stripe) List(ctx context.Context, from, to time.Time, yield func(Event) error) (Report, error) {
	var rep Report
	from, ok, err := s.c.window(from, to, &rep)
	if err != nil || !ok {
		return rep, err
	}
	ctx, cancel := s.c.bounded(ctx)
	defer cancel()
	gte := int64(math.Ceil(float64(from.UnixNano()) / 1e9))
	lte := to.Unix()
	seen := map[string]bool{}
	cursor := ""
	for page := 1; ; page++ {
		if page > s.c.o.MaxPages {
			return rep, fmt.Errorf("stripe: %d pages read, window not finished (next cursor %s): %w", s.c.o.MaxPages, cursor, ErrPageBound)
		}
		q := url.Values{}
		q.Set("created[gte]", strconv.FormatInt(gte, 10))
		q.Set("created[lte]", strconv.FormatInt(lte, 10))
		q.Set("limit", "100")
		for _, t := range s.cfg.Types {
			q.Add("types[]", t)
		}
		if cursor != "" {
			q.Set("starting_after", cursor)
		}
		body, _, err := s.c.do(ctx, http.MethodGet, s.c.endpoint("/v1/events", q), nil)
		if err != nil {
			return rep, &PageError{Page: page, Cursor: cursor, Err: err}
		}
		p, err := parseStripePage(body)
		if err != nil {
			return rep, &PageError{Page: page, Cursor: cursor, Err: fmt.Errorf("stripe: %w: %w", ErrMalformedPage, err)}
		}
		rep.Pages++
		for _, e := range p.Events {
			if seen[e.ID] || e.Created.Unix() < gte || e.Created.Unix() > lte {
				continue
			}
			seen[e.ID] = true
			rep.Listed++
			if s.cfg.APIVersion != "" && e.APIVersion != s.cfg.APIVersion {
				rep.fail("api_version")
				continue
			}
			if err := yield(e); err != nil {
				return rep, err
			}
		}
		if !p.HasMore {
			return rep, nil
		}
		next := p.Events[len(p.Events)-1].ID
		if next == cursor {
			return rep, &PageError{Page: page, Cursor: cursor, Err: fmt.Errorf("stripe: %w: the cursor does not move", ErrMalformedPage)}
		}
		cursor = next
	}
}

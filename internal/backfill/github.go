package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// GitHubHistory is how far back GitHub redelivers a hook's deliveries.
const GitHubHistory = 3 * 24 * time.Hour

// GitHubConfig configures a GitHub redeliverer. Hook is
// "repos/OWNER/REPO/hooks/ID" or "orgs/ORG/hooks/ID".
type GitHubConfig struct {
	Options
	Hook string
}

// GitHub walks GET /{hook}/deliveries newest first and requests one
// redelivery (POST /{hook}/deliveries/{id}/attempts) per unclaimed guid.
type GitHub struct {
	c    *client
	hook string // "/repos/o/r/hooks/1", escaped
}

var _ Redeliverer = (*GitHub)(nil)

// NewGitHub checks the config; api_base defaults to https://api.github.com.
func NewGitHub(cfg GitHubConfig) (*GitHub, error) {
	hook, err := parseHook(cfg.Hook)
	if err != nil {
		return nil, err
	}
	c, err := newClient("github", "https://api.github.com", GitHubHistory, cfg.Options, func(r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+cfg.APIKey)
		r.Header.Set("Accept", "application/vnd.github+json")
		r.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	})
	if err != nil {
		return nil, err
	}
	return &GitHub{c: c, hook: hook}, nil
}

// CheckHook checks a hook path as NewGitHub does.
func CheckHook(s string) error {
	_, err := parseHook(s)
	return err
}

func parseHook(s string) (string, error) {
	parts := strings.Split(strings.Trim(s, "/"), "/")
	bad := fmt.Errorf("github hook %q: want repos/OWNER/REPO/hooks/ID or orgs/ORG/hooks/ID", s)
	for _, p := range parts {
		if p == "" || p == "." || p == ".." || strings.ContainsAny(p, "?#%\\") {
			return "", bad
		}
	}
	var id string
	switch {
	case len(parts) == 5 && parts[0] == "repos" && parts[3] == "hooks":
		id = parts[4]
	case len(parts) == 4 && parts[0] == "orgs" && parts[2] == "hooks":
		id = parts[3]
	default:
		return "", bad
	}
	if n, err := strconv.ParseUint(id, 10, 64); err != nil || n == 0 {
		return "", bad
	}
	return "/" + strings.Join(parts, "/"), nil
}

// ghDelivery is the part of a delivery the walk needs.
type ghDelivery struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	Event       string    `json:"event"`
	StatusCode  int       `json:"status_code"`
}

// parseGitHubPage parses a deliveries array and the Link header's next URL
// ("" on the last page). A delivery without id, guid or delivered_at makes
// the page malformed.
func parseGitHubPage(b []byte, link string) ([]ghDelivery, string, error) {
	var ds []*ghDelivery
	if err := json.Unmarshal(b, &ds); err != nil {
		return nil, "", fmt.Errorf("deliveries: %w", err)
	}
	if ds == nil {
		return nil, "", errors.New("deliveries: want an array")
	}
	out := make([]ghDelivery, 0, len(ds))
	for i, d := range ds {
		if d == nil || d.ID <= 0 || d.GUID == "" || d.DeliveredAt.IsZero() {
			return nil, "", fmt.Errorf("deliveries[%d]: want id, guid and delivered_at", i)
		}
		out = append(out, *d)
	}
	next, err := nextLink(link)
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// nextLink finds rel="next" in an RFC 8288 Link header.
func nextLink(h string) (string, error) {
	if strings.TrimSpace(h) == "" {
		return "", nil
	}
	for _, part := range splitLinks(h) {
		part = strings.TrimSpace(part)
		if !strings.HasPrefix(part, "<") {
			return "", fmt.Errorf("link header: %q: want <url>; rel=...", part)
		}
		end := strings.IndexByte(part, '>')
		if end < 0 {
			return "", fmt.Errorf("link header: %q: unclosed <", part)
		}
		target := part[1:end]
		for _, param := range strings.Split(part[end+1:], ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(param), "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(k), "rel") {
				continue
			}
			for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(v), `"`)) {
				if strings.EqualFold(rel, "next") {
					if target == "" {
						return "", errors.New("link header: empty next url")
					}
					return target, nil
				}
			}
		}
	}
	return "", nil
}

// splitLinks splits on commas outside <...>.
func splitLinks(h string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(h); i++ {
		switch h[i] {
		case '<':
			depth++
		case '>':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				out = append(out, h[start:i])
				start = i + 1
			}
		}
	}
	return append(out, h[start:])
}

// Redeliver walks the deliveries newest first until delivered_at is before
// the window and requests a redelivery for each guid of the window that
// claimed says is not here. A redelivery GitHub refuses (4xx) is counted
// failed with reason "redelivery_refused"; a refused key stops the run.
func (g *GitHub) Redeliver(ctx context.Context, from, to time.Time, claimed func(id string) (bool, error)) (Report, error) {
	var rep Report
	from, ok, err := g.c.window(from, to, &rep)
	if err != nil || !ok {
		return rep, err
	}
	if claimed == nil {
		return rep, errors.New("github: redeliver needs a claimed check")
	}
	ctx, cancel := g.c.bounded(ctx)
	defer cancel()
	seen := map[string]bool{}
	q := url.Values{}
	q.Set("per_page", "100")
	u := g.c.endpoint(g.hook+"/deliveries", q)
	for page := 1; ; page++ {
		cursor := u.Query().Get("cursor")
		if page > g.c.o.MaxPages {
			return rep, fmt.Errorf("github: %d pages read, window not finished (next cursor %s): %w", g.c.o.MaxPages, cursor, ErrPageBound)
		}
		body, hdr, err := g.c.do(ctx, http.MethodGet, u, nil)
		if err != nil {
			return rep, &PageError{Page: page, Cursor: cursor, Err: err}
		}
		ds, next, err := parseGitHubPage(body, hdr.Get("Link"))
		if err != nil {
			return rep, &PageError{Page: page, Cursor: cursor, Err: fmt.Errorf("github: %w: %w", ErrMalformedPage, err)}
		}
		var nu *url.URL
		if next != "" {
			if nu, err = g.c.link(next); err != nil {
				return rep, &PageError{Page: page, Cursor: cursor, Err: err}
			}
		}
		rep.Pages++
		done := false
		for _, d := range ds {
			if d.DeliveredAt.Before(from) {
				done = true // newest first: the rest is older still
				continue
			}
			if d.DeliveredAt.After(to) || seen[d.GUID] {
				continue
			}
			seen[d.GUID] = true
			rep.Listed++
			have, err := claimed(d.GUID)
			if err != nil {
				return rep, fmt.Errorf("github: claimed %s: %w", d.GUID, err)
			}
			if have {
				rep.AlreadyClaimed++
				continue
			}
			if g.c.o.DryRun {
				rep.Requested++
				continue
			}
			if err := g.redeliver(ctx, d.ID); err != nil {
				var se *StatusError
				if !errors.As(err, &se) {
					return rep, fmt.Errorf("github: redeliver %s (delivery %d): %w", d.GUID, d.ID, err)
				}
				rep.fail("redelivery_refused")
				continue
			}
			rep.Requested++
		}
		if done || nu == nil {
			return rep, nil
		}
		if nu.String() == u.String() {
			return rep, &PageError{Page: page, Cursor: cursor, Err: fmt.Errorf("github: %w: the cursor does not move", ErrMalformedPage)}
		}
		u = nu
	}
}

func (g *GitHub) redeliver(ctx context.Context, id int64) error {
	u := g.c.endpoint(g.hook+"/deliveries/"+strconv.FormatInt(id, 10)+"/attempts", nil)
	_, _, err := g.c.do(ctx, http.MethodPost, u, nil)
	return err
}

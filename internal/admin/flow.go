package admin

// Flow control on the admin server (docs/reference.md, "Flow control"):
//
//	GET  /api/destinations                          every configured destination's flow state
//	POST /api/destinations/{source}/{name}/pause    pause it (idempotent): 200 with its state
//	POST /api/destinations/{source}/{name}/resume   resume it (idempotent): 200 with its state
//	POST /dashboard/pause, /dashboard/resume        the dashboard's buttons (destination=D)
//
// Pause and resume go through the store (FlowOperator), the CLI's path,
// with their audit entry in the same transaction; an unknown destination
// is 404 and changes nothing.

import (
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/gorilla/mux"

	"github.com/hookwarden/hookwarden"
)

// FlowStore is the part of the store contract the flow routes use.
type FlowStore interface {
	hookwarden.FlowOperator
	hookwarden.FlowInspector
}

var _ FlowStore = hookwarden.Store(nil)

// registerFlow adds the flow routes of the API to r.
func (api *API) registerFlow(r *mux.Router) {
	r.HandleFunc("/api/destinations", api.destinations).Methods(http.MethodGet)
	r.HandleFunc("/api/destinations/{source}/{name}/{action:pause|resume}", api.pauseResume).Methods(http.MethodPost)
}

// flowStates reads the flow state of names from s, with the rates of the
// configuration.
func flowStates(ctx context.Context, s FlowStore, names []string, rates func() map[string]string) ([]hookwarden.DestinationState, error) {
	states, err := s.Destinations(ctx, names)
	if err != nil {
		return nil, err
	}
	if rates != nil {
		rs := rates()
		for i := range states {
			if r := rs[states[i].Destination]; r != "" {
				states[i].Rate = &r
			}
		}
	}
	return states, nil
}

func (api *API) destinationNames() []string {
	if api.o.Destinations == nil {
		return nil
	}
	return api.o.Destinations()
}

func (api *API) destinations(w http.ResponseWriter, r *http.Request) {
	states, err := flowStates(r.Context(), api.o.Store, api.destinationNames(), api.o.Rates)
	if err != nil {
		api.fail(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, newPage(states, 0))
}

func (api *API) pauseResume(w http.ResponseWriter, r *http.Request) {
	// The same guards as /api/replay: a dashboard's cookie must not let
	// another site's form or fetch pause a destination.
	if refuseCrossOrigin(w, r) {
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		WriteJSON(w, http.StatusUnsupportedMediaType, map[string]string{"status": "bad_request", "error": "want Content-Type: application/json"})
		return
	}
	v := mux.Vars(r)
	dest, action := v["source"]+"/"+v["name"], v["action"]
	if !slices.Contains(api.destinationNames(), dest) {
		api.fail(w, r, hookwarden.ErrNotFound)
		return
	}
	audit := &hookwarden.AuditEntry{Origin: hookwarden.AuditAPI, Actor: r.RemoteAddr}
	st, changed, err := setPause(r.Context(), api.o.Store, dest, action, audit)
	if err != nil {
		api.fail(w, r, err)
		return
	}
	if action == "resume" && api.o.Notify != nil {
		api.o.Notify(dest)
	}
	if api.o.Rates != nil {
		if rate := api.o.Rates()[dest]; rate != "" {
			st.Rate = &rate
		}
	}
	api.o.Logger.Info(action+" from the admin API", "destination", dest, "changed", changed, "remote", r.RemoteAddr)
	WriteJSON(w, http.StatusOK, st)
}

// setPause pauses or resumes dest and reads its state back. The write
// finishes even if the client goes away.
func setPause(ctx context.Context, s FlowStore, dest, action string, audit *hookwarden.AuditEntry) (hookwarden.DestinationState, bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	audit.Args, _ = json.Marshal(map[string]string{"destination": dest})
	var changed bool
	var err error
	if action == "pause" {
		changed, err = s.Pause(ctx, dest, audit)
	} else {
		changed, err = s.Resume(ctx, dest, audit)
	}
	if err != nil {
		return hookwarden.DestinationState{}, false, err
	}
	st, err := s.Destinations(ctx, []string{dest})
	if err != nil || len(st) != 1 {
		return hookwarden.DestinationState{}, changed, err
	}
	return st[0], changed, nil
}

// pauseResume handles the dashboard's Pause and Resume buttons.
func (d *Dashboard) pauseResume(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		dashHeaders(w)
		if !d.checkPost(w, r) {
			return
		}
		dest := r.PostForm.Get("destination")
		if !slices.Contains(d.o.Destinations(), dest) {
			http.Error(w, "destination: not a configured destination", http.StatusNotFound)
			return
		}
		_, changed, err := setPause(r.Context(), d.o.Store, dest, action,
			&hookwarden.AuditEntry{Origin: hookwarden.AuditDashboard, Actor: r.RemoteAddr})
		if err != nil {
			d.o.Logger.Error("dashboard "+action, "destination", dest, "err", err)
			http.Redirect(w, r, "/?error="+action, http.StatusSeeOther)
			return
		}
		if action == "resume" && d.o.Notify != nil {
			d.o.Notify(dest)
		}
		d.o.Logger.Info(action+" from the dashboard", "destination", dest, "changed", changed, "remote", r.RemoteAddr)
		http.Redirect(w, r, "/?"+url.Values{action + "d": {dest}}.Encode()+"#outbox", http.StatusSeeOther)
	}
}

// flowFlash is the flash line of a pause or resume.
func flowFlash(q url.Values, data *dashData) bool {
	switch {
	case q.Get("error") == "pause" || q.Get("error") == "resume":
		data.FlashError = "The " + q.Get("error") + " failed; the log has the details."
	case q.Get("paused") != "":
		data.Flash = "Paused " + q.Get("paused") + ": no attempts and no probes until you resume it."
	case q.Get("resumed") != "":
		data.Flash = "Resumed " + q.Get("resumed") + ": its jobs are delivered again."
	default:
		return false
	}
	return true
}

// withFlow adds each destination's flow state to the outbox rows; a
// destination the store cannot read shows as it was.
func (d *Dashboard) withFlow(ctx context.Context, rows []dashDestRow) error {
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Destination
	}
	states, err := d.o.Store.Destinations(ctx, names)
	if err != nil {
		return err
	}
	for i := range rows {
		if i < len(states) && states[i].Destination == rows[i].Destination {
			rows[i].Flow = states[i]
		}
	}
	return nil
}

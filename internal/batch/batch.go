// Package batch cuts a platform's request into its events (SPEC 11, "One
// request, several events").
//
// Guarantees: each event comes with the request's envelope holding only that
// event, made by deleting byte ranges of the raw body (the other events, the
// sibling event arrays), never by re-encoding: the event's own bytes, its
// escapes and its non-ASCII stay exactly as received, and so does everything
// around it. The ids are the platform's (SPEC 11); where the platform gives
// none, the id is the SHA-256 of the event's own bytes, marked Derived. The
// input is untrusted: it is checked as JSON first, scanned without recursion,
// and a request of more than MaxEvents events is refused.
package batch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
)

// MaxEvents bounds the events of one request. WhatsApp documents batches of
// up to 1000 updates; a larger request is refused (the receiver quarantines
// it: recorded and visible, never dropped).
const MaxEvents = 1000

// Errors of a Splitter. The receiver quarantines a request that fails to
// split, with the error as the reason.
var (
	ErrNotJSON = errors.New("body is not valid JSON")
	ErrShape   = errors.New("body does not have the platform's shape")
	ErrTooMany = errors.New("more events in one request than the limit")
)

// Event is one event of a request.
type Event struct {
	// Body is what is delivered: the request's envelope holding only this
	// event. nil: the request's whole body (a platform that sends one event
	// a request).
	Body []byte
	// Own is the event's own bytes, inside Body.
	Own []byte
	// Doc is what the source's extractors (event id and type, order_by)
	// and filters read: the event's own bytes (Own) where the request holds
	// several, the whole body where it is the event (Discord's Webhook
	// Events too, whose type is at event.type).
	Doc []byte
	// Type is the event's type where the platform puts it outside the
	// event (X's array name, Messenger's item kind, Meta's change field),
	// used when the source's event_type finds none in Doc.
	Type string
	// ID is the claim key; "" when the source's event_id extractor decides
	// (SendGrid's sg_event_id, read from Doc).
	ID string
	// Derived: the platform gives this event no id, and ID is the SHA-256
	// (hex) of Own: a retry of the identical bytes is a duplicate, a retry
	// with any byte changed is not.
	Derived bool
}

// Splitter cuts a verified request body into its events. Zero events and no
// error is a request that carries none (LINE's verify request, an empty
// batch).
type Splitter func(body []byte) ([]Event, error)

// For returns the splitter of a signature scheme, or nil where the source's
// event_id extractor reads the one event of the whole body.
func For(scheme string) Splitter {
	switch scheme {
	case "meta":
		return Meta
	case "line":
		return LINE
	case "x":
		return X
	case "graph":
		return Graph
	case "sendgrid":
		return Array
	case "zoom":
		return Zoom
	case "viber":
		return Viber
	case "telegram":
		return Telegram
	case "discord":
		return Discord
	}
	return nil
}

// Several reports whether one request of the scheme can carry several
// events, each delivered as an envelope of its own (the other splitters cut
// out the one event a request carries).
func Several(scheme string) bool {
	switch scheme {
	case "meta", "line", "x", "graph", "sendgrid":
		return true
	}
	return false
}

// Derive is the claim key of an event without an id.
func Derive(own []byte) string {
	sum := sha256.Sum256(own)
	return hex.EncodeToString(sum[:])
}

// root checks the body as JSON and returns the members of its top-level
// object.
func root(body []byte) ([]member, error) {
	if !json.Valid(body) {
		return nil, ErrNotJSON
	}
	start := skipSpace(body, 0)
	ms, ok := members(body, span{start, valueEnd(body, start)})
	if !ok {
		return nil, ErrShape
	}
	return ms, nil
}

// list returns the elements of the array m holds (ok false: not an array),
// or ErrTooMany past the limit of the request (left: what is left of it).
func list(body []byte, m member, left int) ([]span, bool, error) {
	els, ok := elements(body, m.val(), left)
	if !ok {
		return nil, false, nil
	}
	if len(els) > left {
		return nil, true, ErrTooMany
	}
	return els, true, nil
}

// idOf reads a member's value as an id: a non-empty string, or a number's
// text. ok false: absent or any other kind of value.
func idOf(body []byte, ms []member, key string) (string, bool) {
	m, ok := find(ms, key)
	if !ok {
		return "", false
	}
	raw := body[m.valStart:m.valEnd]
	if len(raw) == 0 {
		return "", false
	}
	switch c := raw[0]; {
	case c == '"':
		s, ok := unquote(raw)
		return s, ok && s != ""
	case c == '-' || ('0' <= c && c <= '9'):
		return string(raw), true
	}
	return "", false
}

// sub returns the members of the object member key of ms holds.
func sub(body []byte, ms []member, key string) ([]member, bool) {
	m, ok := find(ms, key)
	if !ok {
		return nil, false
	}
	return members(body, m.val())
}

// event builds an Event from the cut and the event's own span; id "" makes
// it derived.
func event(body []byte, c cut, own span, id string) Event {
	o := body[own.start:own.end]
	ev := Event{Body: c.apply(body), Doc: o, Own: o, ID: id}
	if id == "" {
		ev.ID, ev.Derived = Derive(ev.Own), true
	}
	return ev
}

// named drops, of an object's members, those among names other than keep.
func named(names ...string) func(keep string) func(member) bool {
	return func(keep string) func(member) bool {
		return func(m member) bool {
			if m.key == keep {
				return false
			}
			for _, n := range names {
				if m.key == n {
					return true
				}
			}
			return false
		}
	}
}

// The event arrays of Meta's objects: the sibling arrays of the one an
// event comes from are left out of its envelope.
var (
	metaEntryArrays = named("changes", "messaging", "standby")
	metaValueArrays = named("messages", "statuses")
)

// Meta splits a WhatsApp Cloud API, Messenger or Instagram request: one event
// per entry[].changes[].value.messages[] (id: its id) and .statuses[] (id +
// ":" + status), per other change (derived), and per entry[].messaging[]
// item (message.mid, else kind:timestamp:sender).
func Meta(body []byte) ([]Event, error) {
	top, err := root(body)
	if err != nil {
		return nil, err
	}
	entry, ok := find(top, "entry")
	if !ok {
		return nil, ErrShape
	}
	entries, ok, err := list(body, entry, MaxEvents)
	if err != nil || !ok {
		return nil, errors.Join(err, shapeIf(!ok))
	}
	var out []Event
	for _, e := range entries {
		ems, ok := members(body, e)
		if !ok {
			return nil, ErrShape
		}
		var base cut
		base.keepOnly(entry.val(), e)
		if ch, ok := find(ems, "changes"); ok {
			changes, ok, err := list(body, ch, MaxEvents-len(out))
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, ErrShape
			}
			for _, c := range changes {
				lc := append(cut{}, base...)
				lc.drop(ems, metaEntryArrays("changes"))
				lc.keepOnly(ch.val(), c)
				evs, err := metaChange(body, lc, c, MaxEvents-len(out))
				if err != nil {
					return nil, err
				}
				out = append(out, evs...)
			}
		}
		if mg, ok := find(ems, "messaging"); ok {
			items, ok, err := list(body, mg, MaxEvents-len(out))
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, ErrShape
			}
			for _, it := range items {
				lc := append(cut{}, base...)
				lc.drop(ems, metaEntryArrays("messaging"))
				lc.keepOnly(mg.val(), it)
				id, kind := messagingID(body, it)
				ev := event(body, lc, it, id)
				ev.Type = kind
				out = append(out, ev)
			}
		}
	}
	return out, nil
}

func shapeIf(bad bool) error {
	if bad {
		return ErrShape
	}
	return nil
}

// metaChange splits one change: its messages and statuses, or the change
// itself (derived) when it has neither.
func metaChange(body []byte, c cut, change span, left int) ([]Event, error) {
	cms, ok := members(body, change)
	if !ok {
		return nil, ErrShape
	}
	var out []Event
	if vm, ok := find(cms, "value"); ok {
		if vms, ok := members(body, vm.val()); ok {
			for _, arr := range []string{"messages", "statuses"} {
				m, ok := find(vms, arr)
				if !ok {
					continue
				}
				items, ok, err := list(body, m, left-len(out))
				if err != nil {
					return nil, err
				}
				if !ok {
					continue
				}
				for _, it := range items {
					lc := append(cut{}, c...)
					lc.drop(vms, metaValueArrays(arr))
					lc.keepOnly(m.val(), it)
					id := ""
					if ims, ok := members(body, it); ok {
						if wamid, ok := idOf(body, ims, "id"); ok {
							id = wamid
							if arr == "statuses" {
								// sent, delivered, read, failed: four events
								st, _ := idOf(body, ims, "status")
								id += ":" + st
							}
						}
					}
					out = append(out, event(body, lc, it, id))
				}
			}
		}
	}
	if len(out) == 0 {
		if left < 1 {
			return nil, ErrTooMany
		}
		ev := event(body, c, change, "")
		if cms, ok := members(body, change); ok {
			ev.Type, _ = idOf(body, cms, "field")
		}
		out = append(out, ev)
	}
	return out, nil
}

// messagingID is a Messenger or Instagram messaging item's id: message.mid,
// else its kind (the member that is not sender, recipient or timestamp),
// timestamp and sender, "" (derived) when those are missing.
func messagingID(body []byte, it span) (id, kind string) {
	ims, ok := members(body, it)
	if !ok {
		return "", ""
	}
	for _, m := range ims {
		switch m.key {
		case "sender", "recipient", "timestamp":
		default:
			if kind == "" {
				kind = m.key
			}
		}
	}
	if msg, ok := sub(body, ims, "message"); ok {
		if mid, ok := idOf(body, msg, "mid"); ok {
			return mid, kind
		}
	}
	ts, okTS := idOf(body, ims, "timestamp")
	sender := ""
	if s, ok := sub(body, ims, "sender"); ok {
		sender, _ = idOf(body, s, "id")
	}
	if kind == "" || !okTS || sender == "" {
		return "", kind
	}
	return kind + ":" + ts + ":" + sender, kind
}

// single splits the members' array named key of a top-level object, each
// element's id read by id ("" derived).
func single(body []byte, key string, id func(ms []member) string) ([]Event, error) {
	top, err := root(body)
	if err != nil {
		return nil, err
	}
	m, ok := find(top, key)
	if !ok {
		return nil, ErrShape
	}
	items, ok, err := list(body, m, MaxEvents)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrShape
	}
	out := make([]Event, 0, len(items))
	for _, it := range items {
		var c cut
		c.keepOnly(m.val(), it)
		ev := ""
		if ims, ok := members(body, it); ok {
			ev = id(ims)
		}
		out = append(out, event(body, c, it, ev))
	}
	return out, nil
}

// LINE splits events[] (id: webhookEventId). An empty events array is LINE's
// verify request: zero events.
func LINE(body []byte) ([]Event, error) {
	return single(body, "events", func(ms []member) string {
		id, _ := idOf(body, ms, "webhookEventId")
		return id
	})
}

// Graph splits a Microsoft Graph change notification collection's value[]
// (id: value[].id, optional).
func Graph(body []byte) ([]Event, error) {
	return single(body, "value", func(ms []member) string {
		id, _ := idOf(body, ms, "id")
		return id
	})
}

// X splits an Account Activity request: every *_events array's items, id
// the array's name + ":" + id_str (else id); the other arrays are left out
// of each envelope, the rest (for_user_id, users, apps) kept.
func X(body []byte) ([]Event, error) {
	top, err := root(body)
	if err != nil {
		return nil, err
	}
	isEvents := func(m member) bool {
		return strings.HasSuffix(m.key, "_events") && m.valStart < len(body) && body[m.valStart] == '['
	}
	var out []Event
	for _, m := range top {
		if !isEvents(m) {
			continue
		}
		items, _, err := list(body, m, MaxEvents-len(out))
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			var c cut
			c.drop(top, func(o member) bool { return o.keyStart != m.keyStart && isEvents(o) })
			c.keepOnly(m.val(), it)
			id := ""
			if ims, ok := members(body, it); ok {
				v, ok := idOf(body, ims, "id_str")
				if !ok {
					v, ok = idOf(body, ims, "id")
				}
				if ok {
					id = m.key + ":" + v
				}
			}
			ev := event(body, c, it, id)
			ev.Type = m.key
			out = append(out, ev)
		}
	}
	return out, nil
}

// Array splits a body that is a JSON array (SendGrid): each element is an
// event, delivered as a one-element array; its id is the source's
// event_id, read from the element (Doc).
func Array(body []byte) ([]Event, error) {
	if !json.Valid(body) {
		return nil, ErrNotJSON
	}
	start := skipSpace(body, 0)
	arr := span{start, valueEnd(body, start)}
	els, ok := elements(body, arr, MaxEvents)
	if !ok {
		return nil, ErrShape
	}
	if len(els) > MaxEvents {
		return nil, ErrTooMany
	}
	out := make([]Event, 0, len(els))
	for _, el := range els {
		var c cut
		c.keepOnly(arr, el)
		own := body[el.start:el.end]
		out = append(out, Event{Body: c.apply(body), Own: own, Doc: own})
	}
	return out, nil
}

// whole is the one event of a request that is the event: id "" derives it
// from the whole body.
func whole(body []byte, id string) []Event {
	ev := Event{Own: body, Doc: body, ID: id}
	if id == "" {
		ev.ID, ev.Derived = Derive(body), true
	}
	return []Event{ev}
}

// Zoom: one event a request, id event:event_ts:payload.object.uuid (else
// its id); derived when event or event_ts is missing.
func Zoom(body []byte) ([]Event, error) {
	top, err := root(body)
	if err != nil {
		return nil, err
	}
	ev, ok1 := idOf(body, top, "event")
	ts, ok2 := idOf(body, top, "event_ts")
	if !ok1 || !ok2 {
		return whole(body, ""), nil
	}
	id := ev + ":" + ts
	if p, ok := sub(body, top, "payload"); ok {
		if o, ok := sub(body, p, "object"); ok {
			if u, ok := idOf(body, o, "uuid"); ok {
				id += ":" + u
			} else if u, ok := idOf(body, o, "id"); ok {
				id += ":" + u
			}
		}
	}
	return whole(body, id), nil
}

// Viber: one event a request, id event:message_token (delivered and seen
// reuse the message's token); derived without a token.
func Viber(body []byte) ([]Event, error) {
	top, err := root(body)
	if err != nil {
		return nil, err
	}
	ev, ok1 := idOf(body, top, "event")
	tok, ok2 := idOf(body, top, "message_token")
	if !ok1 || !ok2 {
		return whole(body, ""), nil
	}
	return whole(body, ev+":"+tok), nil
}

// Telegram: one update a request, id update_id; without one the request
// carries no event (quarantined: Telegram always sends it).
func Telegram(body []byte) ([]Event, error) {
	top, err := root(body)
	if err != nil {
		return nil, err
	}
	id, ok := idOf(body, top, "update_id")
	if !ok {
		return nil, nil
	}
	return whole(body, id), nil
}

// Discord: an interaction's id (a snowflake); a Webhook Event (an "event"
// object, no id) derived from the event's own bytes.
func Discord(body []byte) ([]Event, error) {
	top, err := root(body)
	if err != nil {
		return nil, err
	}
	if m, ok := find(top, "event"); ok && body[m.valStart] == '{' {
		if id, ok := idOf(body, top, "id"); ok {
			return whole(body, id), nil
		}
		own := body[m.valStart:m.valEnd]
		return []Event{{Own: own, Doc: body, ID: Derive(own), Derived: true}}, nil
	}
	id, ok := idOf(body, top, "id")
	if !ok {
		return whole(body, ""), nil
	}
	return whole(body, id), nil
}

// EmptyArray reports whether body is a JSON object whose member key is an
// empty array (LINE's verify request: "events": []).
func EmptyArray(body []byte, key string) bool {
	top, err := root(body)
	if err != nil {
		return false
	}
	m, ok := find(top, key)
	if !ok {
		return false
	}
	els, ok := elements(body, m.val(), 0)
	return ok && len(els) == 0
}

package receiver_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/extract"
	"github.com/hookwarden/hookwarden/internal/signature"
	"github.com/hookwarden/hookwarden/receiver"
)

// Each destination with an order_by gets the event's key with its job, a
// batch element its own; one without, or an event without the key, none.
func TestOrderKeysStoredPerDestination(t *testing.T) {
	for _, batch := range []bool{false, true} {
		store := openStore(t)
		src := source(t, "f", signature.Params{Scheme: "none"})
		src.Batch = batch
		src.EventID, _ = extract.Parse("json:id")
		src.EventType, _ = extract.Parse("json:type")
		by, _ := extract.Parse("json:data.customer|header:X-Customer")
		src.Destinations = []receiver.Destination{{FullName: "f/plain"}, {FullName: "f/by", OrderBy: by}, {FullName: "f/after"}}
		if err := store.SetFlow(context.Background(), []hookwarden.FlowPolicy{{Destination: "f/by", Ordered: true}}); err != nil {
			t.Fatal(err)
		}
		rc := receiver.New([]receiver.Source{src}, receiver.Options{Recorder: store,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		bodies := []string{`{"id":"e1","data":{"customer":"cus_1"}}`, `{"id":"e2","data":{}}`, `{"id":"e3","data":{"customer":"cus_1"}}`}
		if batch {
			postF(t, rc, "["+strings.Join(bodies, ",")+"]")
		} else {
			for _, b := range bodies {
				postF(t, rc, b)
			}
		}
		rows, err := store.DB().Query(`SELECT e.event_id, j.destination, COALESCE(j.order_key, '-') FROM jobs j
			JOIN events e ON e.id = j.event_ref ORDER BY e.event_id, j.destination`)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var id, dest, key string
			if err := rows.Scan(&id, &dest, &key); err != nil {
				t.Fatal(err)
			}
			got = append(got, id+" "+dest+" "+key)
		}
		rows.Close()
		want := "e1 f/after -|e1 f/by cus_1|e1 f/plain -|e2 f/after -|e2 f/by -|e2 f/plain -|e3 f/after -|e3 f/by cus_1|e3 f/plain -"
		if strings.Join(got, "|") != want {
			t.Errorf("batch %v: jobs\n%s\nwant\n%s", batch, strings.Join(got, "|"), want)
		}
	}
}

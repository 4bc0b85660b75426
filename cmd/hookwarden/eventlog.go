package main

import (
	"context"
	"log/slog"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/receiver"
)

// loggedRecorder logs one debug line per event a receipt carried, after the
// commit. It is what ties a request to the deliveries it caused:
//
//	receipt=N source=S event_id=E key=S:E   (this line: request N carried event E)
//	job=J source=S event_id=E attempt=A     (the worker's attempt lines)
//
// source+event_id (the Idempotency-Key the app sees) is the join key; the
// receipt id is the row in `receipts` and `hookwarden events show S E` lists
// every receipt and attempt under it. Nothing from the body or the headers is
// logged: ids and types only.
type loggedRecorder struct {
	receiver.Recorder
	log *slog.Logger
}

func (l loggedRecorder) Record(ctx context.Context, r *hookwarden.Receipt) (hookwarden.RecordResult, error) {
	res, err := l.Recorder.Record(ctx, r)
	if err != nil || !l.log.Enabled(ctx, slog.LevelDebug) {
		return res, err
	}
	for i, er := range res.Events {
		if i >= len(r.Events) {
			break
		}
		ev := &r.Events[i]
		l.log.LogAttrs(ctx, slog.LevelDebug, "event recorded",
			slog.Int64("receipt", res.ReceiptID),
			slog.String("source", r.Source),
			slog.String("event_id", ev.ID),
			slog.String("type", ev.Type),
			slog.String("outcome", string(er.Outcome)),
			slog.Int("jobs", er.Jobs),
			slog.String("key", hookwarden.IdempotencyKey(r.Source, ev.ID)))
	}
	return res, err
}

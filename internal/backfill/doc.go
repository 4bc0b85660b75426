// Package backfill talks to the providers' APIs to recover what an outage
// missed. It does the HTTP and nothing else: it lists the
// events of a window (Stripe, Paddle) or asks the provider to send them again
// (GitHub redeliveries, Svix recover), and reports what it saw.
//
// Two shapes, by provider:
//
//   - A Lister (Stripe, Paddle) walks the provider's event list over a window
//     and yields each event once, with the provider's raw JSON bytes. The
//     caller claims and records them.
//   - A Redeliverer (GitHub, Svix) asks the provider to resend. GitHub's walks
//     the hook's deliveries and asks the caller, per guid, whether it is
//     already claimed before requesting a redelivery; Svix's starts one
//     recover task whose counts are unknown.
//
// Every client refuses an api_base that is not https unless it is loopback,
// and refuses to follow a pagination link or redirect to another origin (the
// key would travel with it). It honours 429 and Retry-After (bounded), retries
// 5xx and transport errors with exponential backoff (bounded attempts), bounds
// the pages, the total time and each response's size, and turns 401/403 into
// ErrKeyRefused. A page that does not parse yields nothing and is named in the
// error (PageError). The part of a window older than the provider keeps is
// reported in Report.BeyondHistory, never listed silently as empty.
//
// The claim and record path, the run log and the command are the caller's
// (cmd/hookwarden, docs/backfill.md).
package backfill

-- Schema version 10 (backfill): a receipt recovered from the provider's API
-- (origin 'backfill': here the backfill's copy of evt_dead, which had
-- arrived live, kept as a duplicate with its own bytes) and the run that
-- listed it.
INSERT INTO receipts (id, source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256, origin) VALUES
  (90, 'stripe', 3, 'duplicate', '2025-01-02T00:20:00.000000Z', 'backfill api.stripe.com',
   'Content-Type: application/json' || char(10) || 'Hookwarden-Backfill-Run: 1',
   CAST('{"id":"evt_dead","object":"event","type":"charge.failed","api_version":"2024-06-20"}' AS BLOB),
   x'9b2f5d0c3d8e1a7f6b4c2e0d9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b', 'backfill');

INSERT INTO backfill_runs (id, source, window_from, window_to, auto, origin, actor, dry_run, method, started_at, touched_at,
                           finished_at, listed, already_claimed, recovered, requested, failed, beyond_from, beyond_to, error) VALUES
  (1, 'stripe', '2025-01-02T00:00:00.000000Z', '2025-01-02T00:19:00.000000Z', 1, NULL, NULL, 0, 'list',
   '2025-01-02T00:20:00.000000Z', '2025-01-02T00:20:01.000000Z', '2025-01-02T00:20:01.000000Z', 3, 3, 0, 0, 0, NULL, NULL, '');

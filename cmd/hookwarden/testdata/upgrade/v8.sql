-- Schema version 8 stores every time as text: the rows of v5-7.sql (the
-- folded evt_folded, the pruned totals, evt_dead held) as a release of
-- schema 8 writes them. The same instants: the upgrade from 5, 6 or 7 must
-- turn v5-7.sql into exactly this.
INSERT INTO events (id, source, event_id, event_type, claimed_at, body_sha256, body,
                    pruned_at, receipts, jobs, attempts, last_received_at, delivered_at) VALUES
  (6, 'stripe', 'evt_folded', 'invoice.paid', '2024-12-01T00:00:00.000000Z', x'', NULL,
   '2025-01-01T00:00:00.000000Z', 2, 1, 1, '2024-12-01T00:01:00.000000Z', '2024-12-01T00:00:05.000000Z');

INSERT INTO pruned_totals (name, kind, n, at) VALUES
  ('stripe', 'duplicate', 1, NULL),
  ('stripe', 'last_received', 0, '2024-12-01T00:01:00.000000Z'),
  ('stripe', 'last_accepted', 0, '2024-12-01T00:00:00.000000Z'),
  ('stripe/app', 'delivered', 1, NULL);

INSERT INTO prune_held (event_ref) VALUES (3);

-- Schema versions 5 to 7 (Unix-seconds times; v8.sql has these rows for 8
-- on): version 5 folds finished events into their claims (the payload tier
-- of retention): evt_folded kept only its claim and a summary; pruned_totals
-- counts what went with it; evt_dead waits in prune_held.
INSERT INTO events (id, source, event_id, event_type, claimed_at, body_sha256, body,
                    pruned_at, receipts, jobs, attempts, last_received_at, delivered_at) VALUES
  (6, 'stripe', 'evt_folded', 'invoice.paid', '2024-12-01T00:00:00.000000Z', x'', NULL,
   1735689600, 2, 1, 1, 1733011260, 1733011205);

INSERT INTO pruned_totals (name, kind, n) VALUES
  ('stripe', 'duplicate', 1),
  ('stripe', 'last_received', 1733011260),
  ('stripe', 'last_accepted', 1733011200),
  ('stripe/app', 'delivered', 1);

INSERT INTO prune_held (event_ref) VALUES (3);

-- Schema version 9 adds flow control: a destination paused by hand, with
-- a failure streak and a rate bucket (not stripe/app, whose jobs the test
-- leases after the upgrade).
INSERT INTO destination_flow (destination, pause, paused_at, failures, next_probe_at, tokens, tokens_at) VALUES
  ('stripe/held', 'manual', '2025-01-02T00:00:00.000000Z', 3, NULL, 4.5, '2025-01-02T00:00:01.000000Z');

-- Schema version 7 holds signed bodies replayed under a fresh id: a github
-- body claimed as d-1 came again as d-2 and is held (body_replayed); the
-- body key that caught it; a Mailgun token seen until it expires.
INSERT INTO receipts (id, source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256, pruned_at, quarantine_reason) VALUES
  (20, 'github', NULL, 'quarantined', '2025-01-03T00:00:00.000000Z', '203.0.113.7:41100', 'X-Github-Delivery: d-2' || char(10) || 'X-Github-Event: release',
   CAST('{"zen":"x"}' AS BLOB), x'0ddcd0e6d1e4a7e4de0c3b8a12a4e3d4b2f0c3e0b7f49c1b7e1a7d2c9f3e4a5b', NULL, 'signed body already claimed as event d-1');

INSERT INTO quarantine (source, body_sha256, receipt_id, reason, first_at, last_at, count, kind, candidate_event_id, original_event_id, released_at, released_event_id) VALUES
  ('github', x'0ddcd0e6d1e4a7e4de0c3b8a12a4e3d4b2f0c3e0b7f49c1b7e1a7d2c9f3e4a5b', 20, 'signed body already claimed as event d-1',
   '2025-01-03T00:00:00.000000Z', '2025-01-03T00:05:00.000000Z', 2, 'body_replayed', 'd-2', 'd-1', NULL, NULL);

INSERT INTO body_keys (id, source, body_sha256, event_id, claimed_at) VALUES
  (1, 'github', x'0ddcd0e6d1e4a7e4de0c3b8a12a4e3d4b2f0c3e0b7f49c1b7e1a7d2c9f3e4a5b', 'd-1', '2025-01-02T23:00:00.000000Z');

INSERT INTO seen_tokens (source, token_sha256, body_sha256, expires_at) VALUES
  ('mailgun', x'aa', x'bb', '2999-01-01T00:00:00.000000Z');

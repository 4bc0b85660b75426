-- Representative rows of schema version 1 for TestUpgradeFromEverySchemaVersion:
-- every table, every receipt kind, every job state, a pruned body, a batch, a
-- quarantined repeat, an expired lease, and runs with and without a clean stop.
-- Applied to a database at version N together with every vK.sql, K <= N, in order.
INSERT INTO runs (id, started_at, heartbeat_at, stopped_at, version, pid) VALUES
  (1, '2025-01-01T00:00:00.000000Z', '2025-01-01T06:00:00.000000Z', '2025-01-01T06:00:00.000000Z', 'v0.1.0', 100),
  (2, '2025-01-02T00:00:00.000000Z', '2025-01-02T00:50:00.000000Z', NULL, 'v0.1.0', 200);

INSERT INTO events (id, source, event_id, event_type, claimed_at, body_sha256, body) VALUES
  (1, 'stripe', 'evt_pending', 'invoice.paid', '2025-01-02T00:10:00.000000Z', x'66ad406f0e9bf48eaf5ca2624e07a0cf12511a6282ba0a8caff6635ca9560327', NULL),
  (2, 'stripe', 'evt_delivered', 'invoice.paid', '2025-01-02T00:11:00.000000Z', x'48029684d82e586541e14a4ced55748ebb4be551457a3d1020c11a3f57160d19', NULL),
  (3, 'stripe', 'evt_dead', 'charge.failed', '2025-01-02T00:12:00.000000Z', x'dcd51f7bf00d041420b56a2b08a10d185273b30a14ca2b2442cdeebfb5da92d8', NULL),
  (4, 'sendgrid', 'sg_1', 'delivered', '2025-01-02T00:13:00.000000Z', x'45036e6ea77a4d0eddb733c219e524a17ea5280e73bc54d64c9e14953e733e8a', CAST('{"sg_event_id":"sg_1","event":"delivered"}' AS BLOB)),
  (5, 'sendgrid', 'sg_2', 'open', '2025-01-02T00:13:00.000000Z', x'cc90c68d52dbe284bc689373332fe7c3b75b96fd97ddf07ee84d397615c228db', CAST('{"sg_event_id":"sg_2","event":"open"}' AS BLOB));

INSERT INTO receipts (id, source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256, pruned_at, quarantine_reason) VALUES
  (1, 'stripe', 1, 'accepted', '2025-01-02T00:10:00.000000Z', '203.0.113.7:41000', 'Content-Type: application/json' || char(10) || 'Stripe-Signature: t=1735776000,v1=5f1d' || char(10) || 'User-Agent: Stripe/1.0', CAST('{"id":"evt_pending","type":"invoice.paid"}' AS BLOB), x'66ad406f0e9bf48eaf5ca2624e07a0cf12511a6282ba0a8caff6635ca9560327', NULL, NULL),
  (2, 'stripe', 2, 'accepted', '2025-01-02T00:11:00.000000Z', '203.0.113.7:41001', 'Content-Type: application/json' || char(10) || 'Stripe-Signature: t=1735776000,v1=5f1d' || char(10) || 'User-Agent: Stripe/1.0', CAST('{"id":"evt_delivered","type":"invoice.paid"}' AS BLOB), x'48029684d82e586541e14a4ced55748ebb4be551457a3d1020c11a3f57160d19', NULL, NULL),
  (3, 'stripe', 2, 'duplicate', '2025-01-02T00:14:00.000000Z', '203.0.113.7:41002', 'Content-Type: application/json' || char(10) || 'Stripe-Signature: t=1735776000,v1=5f1d' || char(10) || 'User-Agent: Stripe/1.0', NULL, x'48029684d82e586541e14a4ced55748ebb4be551457a3d1020c11a3f57160d19', NULL, NULL),
  (4, 'stripe', 2, 'divergent', '2025-01-02T00:15:00.000000Z', '203.0.113.8:41003', 'Content-Type: application/json' || char(10) || 'Stripe-Signature: t=1735776000,v1=5f1d' || char(10) || 'User-Agent: Stripe/1.0', CAST('{"id":"evt_delivered","type":"invoice.paid","livemode":true}' AS BLOB), x'e6a6f71dc28f4cfbff1e2d008ec44d7e1fe26f04eb5dfc1217bfa6cd1c33d991', NULL, NULL),
  (5, 'stripe', 3, 'accepted', '2025-01-02T00:12:00.000000Z', '203.0.113.7:41004', 'Content-Type: application/json' || char(10) || 'Stripe-Signature: t=1735776000,v1=5f1d' || char(10) || 'User-Agent: Stripe/1.0', NULL, x'dcd51f7bf00d041420b56a2b08a10d185273b30a14ca2b2442cdeebfb5da92d8', '2025-01-02T00:40:00.000000Z', NULL),
  (6, 'sendgrid', NULL, 'batch', '2025-01-02T00:13:00.000000Z', '198.51.100.2:52000', 'Content-Type: application/json' || char(10) || 'X-Twilio-Email-Event-Webhook-Signature: MEUCIQ' || char(10) || 'X-Twilio-Email-Event-Webhook-Timestamp: 1735776000', CAST('[{"sg_event_id":"sg_1","event":"delivered"},{"sg_event_id":"sg_2","event":"open"}]' AS BLOB), x'f53270a27d8281f55a4de56bd67f042b47d8d12ba82b19892bc593c1d434905a', NULL, NULL),
  (7, 'stripe', NULL, 'quarantined', '2025-01-02T00:16:00.000000Z', '203.0.113.9:41005', 'Content-Type: application/json' || char(10) || 'Stripe-Signature: t=1735776000,v1=5f1d' || char(10) || 'User-Agent: Stripe/1.0', CAST('{"object":"event"}' AS BLOB), x'961b91ab6ea9a5c4c6a14380820ee884f2833a4e0701c7901ecbc89c5949158d', NULL, 'no event id found');

INSERT INTO receipt_events (event_ref, receipt_id, kind) VALUES
  (4, 6, 'accepted'),
  (5, 6, 'accepted');

INSERT INTO quarantine (source, body_sha256, receipt_id, reason, first_at, last_at, count) VALUES
  ('stripe', x'961b91ab6ea9a5c4c6a14380820ee884f2833a4e0701c7901ecbc89c5949158d', 7, 'no event id found', '2025-01-02T00:16:00.000000Z', '2025-01-02T00:30:00.000000Z', 3);

-- Job 1: pending after two failed attempts. Job 4: leased by a process that
-- died (the lease has expired). Jobs 2 and 5 delivered, job 3 dead.
INSERT INTO jobs (id, event_ref, destination, state, attempts, dead_count, next_at, leased_until, last_error, created_at, finished_at) VALUES
  (1, 1, 'stripe/app', 'pending', 2, 0, '2025-01-02T00:20:00.000000Z', NULL, 'HTTP 503', '2025-01-02T00:10:00.000000Z', NULL),
  (2, 2, 'stripe/app', 'delivered', 1, 0, '2025-01-02T00:11:00.000000Z', NULL, NULL, '2025-01-02T00:11:00.000000Z', '2025-01-02T00:11:00.000000Z'),
  (3, 3, 'stripe/app', 'dead', 12, 1, '2025-01-02T00:12:00.000000Z', NULL, 'HTTP 422: poison', '2025-01-02T00:12:00.000000Z', '2025-01-02T00:45:00.000000Z'),
  (4, 4, 'sendgrid/app', 'pending', 1, 0, '2025-01-02T00:21:00.000000Z', '2025-01-02T00:21:00.000000Z', NULL, '2025-01-02T00:13:00.000000Z', NULL),
  (5, 5, 'sendgrid/app', 'delivered', 1, 0, '2025-01-02T00:13:00.000000Z', NULL, NULL, '2025-01-02T00:13:00.000000Z', '2025-01-02T00:13:00.000000Z');

INSERT INTO attempts (id, job_id, number, started_at, duration_us, status_code, exit_code, error, response, verdict) VALUES
  (1, 1, 1, '2025-01-02T00:10:00.000000Z', 120000, 503, NULL, 'HTTP 503', CAST('busy' AS BLOB), 'retry'),
  (2, 1, 2, '2025-01-02T00:11:00.000000Z', 95000, NULL, NULL, 'dial tcp 127.0.0.1:3000: connection refused', NULL, 'retry'),
  (3, 2, 1, '2025-01-02T00:11:00.000000Z', 8000, 204, NULL, NULL, NULL, 'delivered'),
  (4, 3, 1, '2025-01-02T00:12:00.000000Z', 9000, 422, NULL, 'HTTP 422: poison', CAST('{"error":"bad"}' AS BLOB), 'dead'),
  (5, 5, 1, '2025-01-02T00:13:00.000000Z', 31000000, NULL, 0, NULL, CAST('ok' AS BLOB), 'delivered');

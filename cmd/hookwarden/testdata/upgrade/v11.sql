-- Schema version 11: what a file is (store_marks: here, a partial export),
-- and the instance a run belongs to (runs.instance, as an export of a
-- PostgreSQL store keeps it).
INSERT INTO store_marks (kind, at, since, origin, target) VALUES
  ('export', '2025-01-02T00:00:00.000000Z', '2025-01-01T00:00:00.000000Z', 'postgres://db.example:5432/hookwarden', NULL);

INSERT INTO runs (id, started_at, heartbeat_at, stopped_at, version, pid, instance) VALUES
  (90, '2025-01-01T12:00:00.000000Z', '2025-01-01T12:30:00.000000Z', '2025-01-01T12:30:00.000000Z', 'v1.9.0', 4242, 'receiver-b');

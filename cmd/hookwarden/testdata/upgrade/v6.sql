-- Schema version 6 keeps an audit log of operator actions: a replay from the
-- CLI that reset evt_dead's job.
INSERT INTO audit (id, at, action, origin, actor, args, result, receipt_id) VALUES
  (1, '2024-12-02T00:00:00.000000Z', 'replay', 'cli', 'alice',
   '{"source":"stripe","event_ids":["evt_dead"]}', '{"selected":1,"replayed":1}', NULL);
INSERT INTO audit_events (source, event_id, audit_id) VALUES ('stripe', 'evt_dead', 1);

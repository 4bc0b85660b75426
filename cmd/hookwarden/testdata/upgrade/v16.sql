-- Schema 16: the events above were appended to claims_log by the insert
-- trigger; event 2's claim is folded into claims and out of the log, as
-- serve's fold leaves a generation.
INSERT INTO claims (source, event_id, event_ref) SELECT source, event_id, event_ref FROM claims_log WHERE event_ref = 2;
DELETE FROM claims_log WHERE event_ref = 2;
UPDATE claim_levels SET recent = recent - 1;

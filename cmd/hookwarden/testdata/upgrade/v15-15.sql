-- Schema 15: the events above were claimed in claims_recent by the insert
-- trigger; event 2's claim is folded into claims, as serve's writer moves
-- them.
INSERT INTO claims (source, event_id, event_ref) SELECT source, event_id, event_ref FROM claims_recent WHERE event_ref = 2;
DELETE FROM claims_recent WHERE event_ref = 2;
UPDATE claim_levels SET recent = recent - 1;

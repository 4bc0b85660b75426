-- Hookwarden schema 20: claims whose id Hookwarden derived (issue 47).
--
-- Where a platform gives an event no id at all (Discord Webhook Events,
-- Meta changes other than messages and statuses, Graph items without id),
-- the claim key is the SHA-256 of the event's own bytes: a retry of the
-- identical bytes is a duplicate, one with any byte changed is not. The
-- mark says so in events show and events list --json ("derived_id").
-- Every earlier claim carried the provider's id: 0.
ALTER TABLE events ADD COLUMN derived INTEGER NOT NULL DEFAULT 0;

-- Hookwarden SQLite schema, version 13: the dead letters listing and
-- --status dead read the newest dead letters first (issue 18), as
-- PostgreSQL's schema 11 does.
--
-- Before, both read every dead letter on jobs_dead (destination,
-- finished_at), looked up each one's event and sorted them for a page of
-- 50: 1,000 random reads of the file for the dashboard and as many for
-- --status dead on a store of 10 M claims with a thousand letters (10-14
-- ms, growing with the letters kept). These hold the dead letters in the
-- order the listings read them, so a page looks up its own events. A job
-- has an entry only while it is dead: the ack path and the leases write
-- none.
CREATE INDEX jobs_dead_id ON jobs (id) WHERE state = 'dead';
CREATE INDEX jobs_dead_event ON jobs (event_ref) WHERE state = 'dead';

-- Hookwarden PostgreSQL schema, version 11: --status pending and --status
-- dead walk their jobs newest event first (issue 18).
--
-- Before, those listings semi-joined every pending (or dead) job's event:
-- with stale statistics (a backlog that grew since the last ANALYZE) the
-- planner hashed the whole backlog before it ordered the page, and a dead
-- letters listing could walk jobs_event back through the history to reach
-- old dead letters. These hold only the backlog and the dead letters, in
-- event order, so a page reads its own jobs. Both predicates are on
-- state, which jobs_due already indexes: no update that was HOT stops
-- being one; a job adds one entry while it is pending or dead.
CREATE INDEX jobs_pending_event ON jobs (event_ref) WHERE state = 'pending';
CREATE INDEX jobs_dead_event ON jobs (event_ref) WHERE state = 'dead';

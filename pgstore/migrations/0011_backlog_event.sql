-- Hookwarden PostgreSQL schema, version 11: --status pending and --status
-- dead walk their jobs newest event first, and the dead letters listing
-- its letters newest job first (issue 18).
--
-- Before, those listings semi-joined every pending (or dead) job's event:
-- with stale statistics (a backlog that grew since the last ANALYZE) the
-- planner hashed the whole backlog before it ordered the page, and a dead
-- letters listing could walk jobs_event back through the history to reach
-- old dead letters. The dead letters listing (dashboard, dead list), in
-- job id order, walked jobs_pkey back past every job newer than the page's
-- letters (172,000 jobs, 13,000 buffers, 29 ms with old letters on a store
-- of 10 M claims). These hold only the backlog and the dead letters, in
-- the order their listings read, so a page reads its own jobs. Every
-- predicate is on state, which jobs_due already indexes: no update that
-- was HOT stops being one; a job adds an entry while it is pending or two
-- while it is dead.
CREATE INDEX jobs_pending_event ON jobs (event_ref) WHERE state = 'pending';
CREATE INDEX jobs_dead_event ON jobs (event_ref) WHERE state = 'dead';
CREATE INDEX jobs_dead_id ON jobs (id) WHERE state = 'dead';

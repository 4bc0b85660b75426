-- Retention reads what expires through an index, a batch (LIMIT) at a
-- time, so that its cost follows what goes, not what stays: the seen
-- tokens by expiry, the held requests by their last copy, the released
-- ones by their release. A held row's repeat counter then moves an
-- indexed column (last_at): repeats are rare, and the row is narrow.
CREATE INDEX seen_tokens_expiry ON seen_tokens (expires_at);
CREATE INDEX quarantine_held_expiry ON quarantine (last_at) WHERE released_at IS NULL;
CREATE INDEX quarantine_released_expiry ON quarantine (released_at) WHERE released_at IS NOT NULL;

-- Schema version 2 added jobs.replayed_at: job 1 was replayed by an operator.
UPDATE jobs SET replayed_at = '2025-01-02T00:19:00.000000Z' WHERE id = 1;

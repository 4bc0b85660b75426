-- Schema 23: requests refused at the door, per source, hour and reason.
INSERT INTO refusal_hours (source, hour, reason, n) VALUES ('stripe', '2026-12-01T10:00:00.000000Z', 'mismatch', 4);

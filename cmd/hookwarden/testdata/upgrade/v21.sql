-- Schema 21: a minute in which most of a source's requests were answered 503
-- (gaps' windows of kind unavailable).
INSERT INTO unavailable_minutes (source, minute, requests, unavailable) VALUES ('stripe', '2026-12-01T10:00:00.000000Z', 10, 8);

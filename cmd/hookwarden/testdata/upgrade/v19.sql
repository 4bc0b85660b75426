-- Schema 19: a part of a claims filter serve's writer was keeping (no
-- header names it here: a file of the next schema must still hold the row).
INSERT INTO claims_filter_parts (part, bits) VALUES (0, zeroblob(1024));

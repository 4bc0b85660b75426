-- Schema 19: a claims filter serve's writer kept in parts (its bits do not
-- matter here: a file of the next schema must still hold the rows).
INSERT INTO claims_filter (slot, hash, size, keys, log_seq, parts, bits) VALUES (0, 'xxh64', 1048576, 2, 0, 1, x'');
INSERT INTO claims_filter_parts (slot, part, bits) VALUES (0, 0, zeroblob(1024));

-- A health check that found the last write failed (a full disk) writes here to see whether the
-- store takes writes again: as much as a turn writes, so that it goes in only where a turn would.
CREATE TABLE IF NOT EXISTS write_probes (id INTEGER PRIMARY KEY, at BIGINT NOT NULL, payload BYTEA NOT NULL);

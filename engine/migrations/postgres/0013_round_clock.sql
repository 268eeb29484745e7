-- A lobby round's clock of its own: `round_at`, when the round under way was asked (the
-- session's newest turn), kept for lobby packs' sessions alone (NULL for the others). The sweep
-- that closes rounds at their timeout reads it through the open-rounds index, which no longer
-- holds `updated_at`: an ordinary turn changes no indexed column of its session's row, so
-- PostgreSQL updates it in place (a heap-only tuple) without a new entry in any of the sessions
-- table's indexes. Sessions older than this might be a lobby's: each unfinished one keeps its
-- clock (new sessions say which they are).
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS round_at BIGINT;
UPDATE sessions SET round_at = updated_at WHERE NOT finished;

DROP INDEX IF EXISTS sessions_open_rounds;
CREATE INDEX IF NOT EXISTS sessions_open_rounds ON sessions (pack, round_at) WHERE round_at IS NOT NULL AND NOT finished;

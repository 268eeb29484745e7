-- A conversation linked again, word for word, to another session or checkpoint (two clients
-- opening alike) is shared: it is continued in a fork, never in the session another was handed.
ALTER TABLE transcript_links ADD COLUMN IF NOT EXISTS shared BOOLEAN NOT NULL DEFAULT FALSE;

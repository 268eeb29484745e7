-- Long work a server runs for its clients (a tune's games), kept here so every process answers
-- for it: where it is, its answer, a request to stop it. A finished job is kept for a day.
CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    -- What it does: `tune`, `sweep`.
    kind TEXT NOT NULL,
    pack TEXT NOT NULL,
    -- The key that started it (`key:<id>`); NULL for the operator.
    owner TEXT,
    -- running, done, failed or cancelled.
    state TEXT NOT NULL,
    -- JSON: what it was asked, where it is, its answer (or error) once it ended.
    request TEXT NOT NULL,
    progress TEXT NOT NULL,
    result TEXT,
    -- Asked to stop: by a client, or by its last watcher leaving. Its runner reads it.
    stop BOOLEAN NOT NULL DEFAULT FALSE,
    -- The clients following its events, on every process.
    watchers INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE INDEX jobs_updated ON jobs (updated_at);

-- Sessions and their checkpoints; see the SQLite migration for the model. Here the session row
-- is advanced by the store in the same transaction as the insert.
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    pack TEXT NOT NULL,
    pack_version TEXT NOT NULL,
    options TEXT NOT NULL,
    seed BIGINT NOT NULL,
    turns BIGINT NOT NULL DEFAULT 0,
    head BIGINT NOT NULL DEFAULT 0,
    head_kind TEXT NOT NULL DEFAULT 'start',
    snapshot_seq BIGINT NOT NULL DEFAULT 0,
    finished BOOLEAN NOT NULL DEFAULT FALSE,
    finished_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    parent TEXT,
    parent_checkpoint BIGINT
);

CREATE TABLE IF NOT EXISTS checkpoints (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    turn BIGINT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('start', 'step', 'turn')),
    step BIGINT,
    pack_version TEXT NOT NULL,
    input TEXT,
    updates TEXT NOT NULL,
    snapshot TEXT,
    exchanges TEXT NOT NULL,
    resume TEXT,
    finished BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE INDEX IF NOT EXISTS sessions_finished ON sessions (finished, finished_at);

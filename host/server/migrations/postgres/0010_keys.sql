-- Who may reach a session besides the operator, kept here so every process honours the same keys.
-- A key is kept as the SHA-256 of its secret (hex), never the secret. A session's key and its
-- players' keys go with the session; a key the operator issued stays until it is revoked.
CREATE TABLE IF NOT EXISTS session_keys (
    hash TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    -- The player a player key answers for; NULL for the session's own key.
    player TEXT
);

CREATE INDEX IF NOT EXISTS session_keys_session ON session_keys (session_id);

CREATE TABLE IF NOT EXISTS issued_keys (
    id TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    label TEXT NOT NULL,
    -- The packs it may play, as a JSON list; NULL for every pack.
    packs TEXT,
    created_at BIGINT NOT NULL
);

-- Which key made a session (`key:<id>` for an issued key, `session:<id>` for the key of the
-- session a fork was made from): that key reaches it too, and lists it.
CREATE TABLE IF NOT EXISTS session_owners (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    owner TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS session_owners_owner ON session_owners (owner, session_id);

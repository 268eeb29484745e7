-- Where a conversation held by a stateless chat client stands: the hash of its transcript (its
-- messages so far) → the session and checkpoint it reached. The chat face looks a client's
-- conversation up here instead of scanning sessions, whichever replica linked it; deleting a
-- session drops its links.
CREATE TABLE IF NOT EXISTS transcript_links (
    key TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE INDEX IF NOT EXISTS transcript_links_session ON transcript_links (session_id);

-- Where a conversation held by a stateless chat client stands: the hash of its transcript (its
-- messages so far) → the session and checkpoint it reached. The chat face looks a client's
-- conversation up here instead of scanning sessions; deleting a session drops its links.
CREATE TABLE transcript_links (
    key TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE INDEX transcript_links_session ON transcript_links (session_id);

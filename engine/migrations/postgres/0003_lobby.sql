-- Lobby rounds: each player's input to the round under way, waiting until every player has
-- answered or the round times out. The turn that closes the round (any turn) clears them, in the
-- transaction that records it.
CREATE TABLE IF NOT EXISTS lobby_inputs (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    round BIGINT NOT NULL,
    player TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('answer', 'join', 'leave')),
    input TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, round, player, kind)
);

CREATE INDEX IF NOT EXISTS lobby_inputs_open ON lobby_inputs (kind, created_at);

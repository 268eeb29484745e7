-- Lobby rounds: each player's input to the round under way, waiting until every player has
-- answered or the round times out. The turn that closes the round (any turn) clears them, in the
-- statement that records it.
CREATE TABLE lobby_inputs (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    round INTEGER NOT NULL,
    player TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('answer', 'join', 'leave')),
    input TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, round, player, kind)
);

CREATE INDEX lobby_inputs_open ON lobby_inputs (kind, created_at);

CREATE TRIGGER turn_clears_lobby_inputs AFTER INSERT ON checkpoints
WHEN NEW.kind = 'turn'
BEGIN
    DELETE FROM lobby_inputs WHERE session_id = NEW.session_id;
END;

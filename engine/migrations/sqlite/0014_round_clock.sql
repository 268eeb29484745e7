-- A lobby round's clock of its own: `round_at`, when the round under way was asked (the
-- session's newest turn), kept for lobby packs' sessions alone (NULL for the others). The sweep
-- that closes rounds at their timeout reads it through the open-rounds index, which no longer
-- holds `updated_at`: an ordinary turn, which moves `updated_at`, leaves the index alone (a page
-- of the log less per turn). Sessions older than this might be a lobby's: each unfinished one
-- keeps its clock (new sessions say which they are).
ALTER TABLE sessions ADD COLUMN round_at INTEGER;
UPDATE sessions SET round_at = updated_at WHERE NOT finished;

DROP INDEX sessions_open_rounds;
CREATE INDEX sessions_open_rounds ON sessions (pack, round_at) WHERE round_at IS NOT NULL AND NOT finished;

-- A turn asks the next round: its clock starts over (a session without one has none to move,
-- and its row's index entries stay as they are).
CREATE TRIGGER turn_asks_the_next_round AFTER INSERT ON checkpoints
WHEN NEW.kind = 'turn'
BEGIN
    UPDATE sessions SET round_at = NEW.created_at WHERE id = NEW.session_id AND round_at IS NOT NULL;
END;

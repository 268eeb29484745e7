-- The turn in which a session's state was first set by hand (an edit, or a fork with a patch):
-- a game won on such a state is no real win, and every face says so. Set by the first `edit`
-- checkpoint (a fork's row is written with what it inherits); sessions edited before this
-- migration are filled in from their checkpoints.
ALTER TABLE sessions ADD COLUMN edited_turn INTEGER;

UPDATE sessions SET edited_turn = (
    SELECT min(c.turn) FROM checkpoints c
    WHERE c.kind = 'edit' AND c.key >= sessions.number * 4294967296 AND c.key < (sessions.number + 1) * 4294967296
);

CREATE TRIGGER checkpoint_edit_marks_session AFTER INSERT ON checkpoints
WHEN NEW.kind = 'edit'
BEGIN
    UPDATE sessions SET edited_turn = coalesce(edited_turn, NEW.turn) WHERE number = NEW.key / 4294967296;
END;

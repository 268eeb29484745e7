-- A checkpoint advances its session without rewriting the session's entry in the `finished` index
-- every turn: the head moves in one trigger, and `finished` is assigned only when it changes (an
-- UPDATE that assigns an indexed column rewrites that index's entry, whatever the value).
DROP TRIGGER checkpoint_advances_session;

CREATE TRIGGER checkpoint_advances_session AFTER INSERT ON checkpoints
WHEN NEW.kind <> 'start'
BEGIN
    UPDATE sessions SET
        head = NEW.seq,
        head_kind = NEW.kind,
        turns = CASE WHEN NEW.kind = 'turn' THEN NEW.turn ELSE turns END,
        snapshot_seq = CASE WHEN NEW.snapshot IS NOT NULL THEN NEW.seq ELSE snapshot_seq END,
        updated_at = NEW.created_at
    WHERE id = NEW.session_id;
END;

CREATE TRIGGER checkpoint_finishes_session AFTER INSERT ON checkpoints
WHEN NEW.kind <> 'start' AND NEW.finished = 1
BEGIN
    UPDATE sessions SET finished = 1, finished_at = coalesce(finished_at, NEW.created_at)
    WHERE id = NEW.session_id AND finished = 0;
END;

CREATE TRIGGER checkpoint_unfinishes_session AFTER INSERT ON checkpoints
WHEN NEW.kind <> 'start' AND NEW.finished = 0
BEGIN
    UPDATE sessions SET finished = 0 WHERE id = NEW.session_id AND finished = 1;
END;

-- Two more kinds of checkpoint: `break`, a turn held at a breakpoint (resuming it goes on from
-- there), and `edit`, the state set by hand. SQLite cannot alter a CHECK constraint, so the table
-- is rebuilt as its documentation says (create, copy, drop, rename), and the triggers that fire
-- on it, dropped with the old table, are made again as they stood.
CREATE TABLE checkpoints_new (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('start', 'step', 'turn', 'break', 'edit')),
    step INTEGER,
    pack_version TEXT NOT NULL,
    input TEXT,
    updates TEXT NOT NULL,
    snapshot TEXT,
    exchanges TEXT NOT NULL,
    resume TEXT,
    finished INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

INSERT INTO checkpoints_new SELECT * FROM checkpoints;
DROP TABLE checkpoints;
ALTER TABLE checkpoints_new RENAME TO checkpoints;

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

CREATE TRIGGER snapshot_prunes_older AFTER INSERT ON checkpoints
WHEN NEW.snapshot IS NOT NULL AND NEW.seq > 0
BEGIN
    UPDATE checkpoints SET snapshot = NULL
    WHERE session_id = NEW.session_id AND seq > 0 AND seq < NEW.seq AND snapshot IS NOT NULL;
END;

CREATE TRIGGER turn_clears_lobby_inputs AFTER INSERT ON checkpoints
WHEN NEW.kind = 'turn'
BEGIN
    DELETE FROM lobby_inputs WHERE session_id = NEW.session_id;
END;

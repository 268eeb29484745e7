-- A checkpoint row that a turn appends in one page of the log.
--
-- Checkpoints were a WITHOUT ROWID table keyed by (session_id, seq): an index B-tree that keeps
-- about 1 kB of a row in its page, so a pirate turn's 4-5 kB row spilled into an overflow page
-- and was copied whole into the interior page as a divider. Now:
--
-- * each session has a `number`, and a checkpoint's key is one integer, the session's number
--   times 2^32 plus its seq: the table's own rowid. A session's checkpoints are one range of
--   that B-tree, a turn's row goes at the end of its session's range, and no second index is
--   written;
-- * a checkpoint's updates and model exchanges are one compressed column, `body` (a zstd frame
--   of the JSON array [updates, exchanges], written by the store): a pirate turn's row is about
--   1.9 kB, two to a page. Rows written before keep their `updates` and `exchanges` text, which
--   the store reads as it did (SQL cannot compress them here).
--
-- Nothing refers to a checkpoint from outside, so the key's change is a rebuild of the table as
-- SQLite's documentation describes (create, copy, drop, rename), with its triggers made again.
-- Deleting a session deletes its checkpoints through a trigger of its own instead of a foreign
-- key (which would need an index on the session's id).
ALTER TABLE sessions ADD COLUMN number INTEGER;
UPDATE sessions SET number = rowid;
CREATE UNIQUE INDEX sessions_number ON sessions (number);

CREATE TABLE checkpoints_new (
    key INTEGER PRIMARY KEY,
    turn INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('start', 'step', 'turn', 'break', 'edit')),
    step INTEGER,
    pack_version TEXT NOT NULL,
    input TEXT,
    body BLOB,
    snapshot TEXT,
    resume TEXT,
    finished INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updates TEXT,
    exchanges TEXT,
    CHECK (body IS NOT NULL OR (updates IS NOT NULL AND exchanges IS NOT NULL))
);

INSERT INTO checkpoints_new
    (key, turn, kind, step, pack_version, input, snapshot, resume, finished, created_at, updates, exchanges)
SELECT s.number * 4294967296 + c.seq, c.turn, c.kind, c.step, c.pack_version, c.input, c.snapshot, c.resume,
    c.finished, c.created_at, c.updates, c.exchanges
FROM checkpoints c JOIN sessions s ON s.id = c.session_id;
DROP TABLE checkpoints;
ALTER TABLE checkpoints_new RENAME TO checkpoints;

CREATE TRIGGER session_deletes_checkpoints AFTER DELETE ON sessions
BEGIN
    DELETE FROM checkpoints WHERE key >= OLD.number * 4294967296 AND key < (OLD.number + 1) * 4294967296;
END;

-- The triggers that follow a checkpoint, as they stood, finding the session by its number.
CREATE TRIGGER checkpoint_advances_session AFTER INSERT ON checkpoints
WHEN NEW.kind <> 'start'
BEGIN
    UPDATE sessions SET
        head = NEW.key & 4294967295,
        head_kind = NEW.kind,
        turns = CASE WHEN NEW.kind = 'turn' THEN NEW.turn ELSE turns END,
        snapshot_seq = CASE WHEN NEW.snapshot IS NOT NULL THEN NEW.key & 4294967295 ELSE snapshot_seq END,
        updated_at = NEW.created_at
    WHERE number = NEW.key >> 32;
END;

CREATE TRIGGER checkpoint_finishes_session AFTER INSERT ON checkpoints
WHEN NEW.kind <> 'start' AND NEW.finished = 1
BEGIN
    UPDATE sessions SET finished = 1, finished_at = coalesce(finished_at, NEW.created_at)
    WHERE number = NEW.key >> 32 AND finished = 0;
END;

CREATE TRIGGER checkpoint_unfinishes_session AFTER INSERT ON checkpoints
WHEN NEW.kind <> 'start' AND NEW.finished = 0
BEGIN
    UPDATE sessions SET finished = 0 WHERE number = NEW.key >> 32 AND finished = 1;
END;

CREATE TRIGGER snapshot_prunes_older AFTER INSERT ON checkpoints
WHEN NEW.snapshot IS NOT NULL AND NEW.key & 4294967295 > 0
BEGIN
    UPDATE checkpoints SET snapshot = NULL
    WHERE key > (NEW.key >> 32) * 4294967296 AND key < NEW.key AND snapshot IS NOT NULL;
END;

CREATE TRIGGER turn_clears_lobby_inputs AFTER INSERT ON checkpoints
WHEN NEW.kind = 'turn'
BEGIN
    DELETE FROM lobby_inputs WHERE session_id = (SELECT id FROM sessions WHERE number = NEW.key >> 32);
END;

CREATE TRIGGER turn_asks_the_next_round AFTER INSERT ON checkpoints
WHEN NEW.kind = 'turn'
BEGIN
    UPDATE sessions SET round_at = NEW.created_at WHERE number = NEW.key >> 32 AND round_at IS NOT NULL;
END;

-- Sessions and their checkpoints. A checkpoint holds the updates a turn (or a step of a long turn)
-- applied, node by node: the state at any checkpoint is the session's start snapshot with every
-- later checkpoint's updates folded in. A full snapshot is kept every few turns so that loading
-- the current state replays only the last few; older snapshots are pruned (the start one stays).
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    pack TEXT NOT NULL,
    pack_version TEXT NOT NULL,
    options TEXT NOT NULL,
    seed INTEGER NOT NULL,
    turns INTEGER NOT NULL DEFAULT 0,
    head INTEGER NOT NULL DEFAULT 0,
    head_kind TEXT NOT NULL DEFAULT 'start',
    snapshot_seq INTEGER NOT NULL DEFAULT 0,
    finished INTEGER NOT NULL DEFAULT 0,
    finished_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    parent TEXT,
    parent_checkpoint INTEGER
);

CREATE TABLE checkpoints (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('start', 'step', 'turn')),
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

CREATE INDEX sessions_finished ON sessions (finished, finished_at);

-- One statement commits a checkpoint: the session's head follows it here.
CREATE TRIGGER checkpoint_advances_session AFTER INSERT ON checkpoints
WHEN NEW.kind <> 'start'
BEGIN
    UPDATE sessions SET
        head = NEW.seq,
        head_kind = NEW.kind,
        turns = CASE WHEN NEW.kind = 'turn' THEN NEW.turn ELSE turns END,
        snapshot_seq = CASE WHEN NEW.snapshot IS NOT NULL THEN NEW.seq ELSE snapshot_seq END,
        finished = NEW.finished,
        finished_at = CASE WHEN NEW.finished = 1 AND finished_at IS NULL THEN NEW.created_at ELSE finished_at END,
        updated_at = NEW.created_at
    WHERE id = NEW.session_id;
END;

CREATE TRIGGER snapshot_prunes_older AFTER INSERT ON checkpoints
WHEN NEW.snapshot IS NOT NULL AND NEW.seq > 0
BEGIN
    UPDATE checkpoints SET snapshot = NULL
    WHERE session_id = NEW.session_id AND seq > 0 AND seq < NEW.seq AND snapshot IS NOT NULL;
END;

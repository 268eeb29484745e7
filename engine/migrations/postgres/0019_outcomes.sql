-- One row per live game (a session opened for a player, not a simulated, forked, replayed or
-- debugging one): written as it opens, completed as it ends, kept past the session's expiry.
-- What live reports by variant read.
CREATE TABLE outcomes (
    session TEXT PRIMARY KEY,
    pack TEXT NOT NULL,
    version TEXT NOT NULL,
    variant TEXT,
    player TEXT,
    outcome TEXT,
    tracked TEXT,
    turns BIGINT,
    created_at BIGINT NOT NULL,
    finished_at BIGINT
);
CREATE INDEX outcomes_by_pack ON outcomes (pack, created_at);
CREATE INDEX outcomes_by_player ON outcomes (player) WHERE player IS NOT NULL;

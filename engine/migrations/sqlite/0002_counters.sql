-- Counters of packs' data tables (a question's times_used): shared by every session of a pack,
-- bumped in the transaction that records the turn that counted, and never by a turn undone.
CREATE TABLE IF NOT EXISTS counters (
    pack TEXT NOT NULL,
    tab TEXT NOT NULL,
    counter TEXT NOT NULL,
    key TEXT NOT NULL,
    n BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (pack, tab, counter, key)
);

-- The lobby sweep: the unfinished sessions of a lobby pack whose question is older than its
-- timeout, several times a second.
CREATE INDEX sessions_open_rounds ON sessions (pack, updated_at) WHERE NOT finished;

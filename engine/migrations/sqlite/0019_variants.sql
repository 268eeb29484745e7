-- The variant of its pack's experiment a session plays, and the hash of the player it was opened
-- for: a session resumes on its variant's rules, and a player's sessions can be found to erase.
ALTER TABLE sessions ADD COLUMN variant TEXT;
ALTER TABLE sessions ADD COLUMN player TEXT;
CREATE INDEX sessions_by_player ON sessions (player) WHERE player IS NOT NULL;

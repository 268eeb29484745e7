-- Playing is not debugging. An issued key may have rights beyond playing (`rights`, a JSON list:
-- `debug`) and an end (`expires_at`, unix milliseconds); a session's key may debug its session
-- (edit its state, hold and resume its turns, fork with a patch, replay) only when the session
-- was made for that (`debug`) by a key that may.
ALTER TABLE issued_keys ADD COLUMN rights TEXT;
ALTER TABLE issued_keys ADD COLUMN expires_at INTEGER;
ALTER TABLE session_keys ADD COLUMN debug INTEGER NOT NULL DEFAULT 0;

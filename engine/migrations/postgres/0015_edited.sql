-- The turn in which a session's state was first set by hand (an edit, or a fork with a patch):
-- a game won on such a state is no real win, and every face says so. The store sets it with the
-- first `edit` checkpoint (a fork's row is written with what it inherits); sessions edited before
-- this migration are filled in from their checkpoints.
ALTER TABLE sessions ADD COLUMN edited_turn BIGINT;

UPDATE sessions s SET edited_turn = e.turn
FROM (SELECT session_id, min(turn) AS turn FROM checkpoints WHERE kind = 'edit' GROUP BY session_id) e
WHERE e.session_id = s.id;

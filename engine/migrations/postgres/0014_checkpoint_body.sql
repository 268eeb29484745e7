-- A checkpoint's updates and model exchanges are one compressed column, `body` (a zstd frame of
-- the JSON array [updates, exchanges], written by the store). A pirate turn's row was 3.1 kB as
-- stored (PostgreSQL's own compression of 4.7 kB of text) and spilled into TOAST on most turns;
-- with its body it is about 2 kB. Rows written before keep their `updates` and `exchanges` text,
-- read as they were.
--
-- PostgreSQL sends a row's values to TOAST from 2 kB (`toast_tuple_target`), the biggest first
-- and down to a 66-byte input, one TOAST row each: about half of the pirate's rows sit right at
-- that line. The table's line is 4 kB instead, so such a row stays whole in its heap page; a
-- larger one (a turn with a snapshot) has its snapshot compressed first. The body is stored in
-- the row (STORAGE MAIN: out of line only if nothing else makes the row fit a page), and
-- PostgreSQL's own compression finds nothing more to take from it.
ALTER TABLE checkpoints ADD COLUMN IF NOT EXISTS body BYTEA;
ALTER TABLE checkpoints ALTER COLUMN body SET STORAGE MAIN;
ALTER TABLE checkpoints ALTER COLUMN updates DROP NOT NULL;
ALTER TABLE checkpoints ALTER COLUMN exchanges DROP NOT NULL;
ALTER TABLE checkpoints SET (toast_tuple_target = 4080);

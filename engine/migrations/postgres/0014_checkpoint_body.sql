-- A checkpoint's updates and model exchanges are one compressed column, `body` (a zstd frame of
-- the JSON array [updates, exchanges], written by the store). A pirate turn's row was 3.1 kB as
-- stored (PostgreSQL's own compression of 4.7 kB of text) and spilled into TOAST on most turns;
-- with its body it is about 1.9 kB. The body is stored in the row itself (STORAGE MAIN: kept in
-- the heap page unless nothing else makes the row fit; PostgreSQL's own compression finds nothing
-- more to take from it). Rows written before keep their `updates` and `exchanges` text, read as they were.
ALTER TABLE checkpoints ADD COLUMN IF NOT EXISTS body BYTEA;
ALTER TABLE checkpoints ALTER COLUMN body SET STORAGE MAIN;
ALTER TABLE checkpoints ALTER COLUMN updates DROP NOT NULL;
ALTER TABLE checkpoints ALTER COLUMN exchanges DROP NOT NULL;

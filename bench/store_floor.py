"""The floor under a persisted pirate turn: one SQLite commit of the row a turn writes, timed
without the engine, and what compressing that row costs at other zstd settings.

    cargo build --release -p ruleweave --bin ruleweave
    /var/tmp/lgvenv/bin/python bench/store_floor.py      (a Python with `zstandard`: the
                                                          LangGraph baseline's venv has it)

It plays four turns of the pirate (the bench's messages) into a fresh SQLite database with
`ruleweave run --store`, takes the last turn's checkpoint row, and then, on copies of that
database (WAL, synchronous=NORMAL, the log checkpointed every 500 turns as the store's own
checkpointer keeps it short), inserts that row again and again through the statement the store
uses, one transaction a turn: with every trigger, with the four an ordinary turn fires to no
effect dropped, with `locking_mode = EXCLUSIVE`, and with `synchronous = OFF` (no `fsync` at
all: the commit's own work). Python's own few microseconds a call are included. Then it compresses the row's JSON at zstd levels 1 and
-1, and at level 1 with a dictionary of the pack's templates. Figures: docs/performance.md, "The
persisted turn against its floor".
"""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

import zstandard

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.environ.get("RULEWEAVE", os.path.join(ROOT, "target/release/ruleweave"))
TURNS = 3000
RUNS = 3

INSERT = (
    "INSERT INTO checkpoints (key, turn, kind, step, pack_version, input, body, snapshot, resume, finished, created_at) "
    "SELECT number * 4294967296 + ?2, ?3, 'turn', NULL, 'v', '{}', ?4, NULL, NULL, 0, 1 "
    "FROM sessions WHERE id = ?1 AND head = ?2 - 1 AND number IS NOT NULL"
)
IDLE_TRIGGERS = [
    "checkpoint_finishes_session",
    "checkpoint_unfinishes_session",
    "turn_clears_lobby_inputs",
    "turn_asks_the_next_round",
]


def pirate_database(directory):
    """A database holding a pirate game of four ordinary turns (on the stand-in model the captain
    yields on the fifth of these messages), and the newest row's compressed body."""
    lines = open(os.path.join(ROOT, "tests/data/pirate_messages.txt")).read().splitlines()
    inputs = os.path.join(directory, "inputs.json")
    with open(inputs, "w") as f:
        json.dump(lines[:4], f)
    db = os.path.join(directory, "pirate.db")
    subprocess.run(
        [BINARY, "run", "pirate", "--root", ROOT, "--input", inputs, "--store", f"sqlite://{db}"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    c = sqlite3.connect(db)
    (body,) = c.execute("SELECT body FROM checkpoints WHERE kind = 'turn' ORDER BY key DESC LIMIT 1").fetchone()
    c.close()
    return db, body


def commits(db, body, pragmas=(), drop=(), synchronous="NORMAL"):
    """Microseconds per turn: the row inserted and committed, one transaction a turn."""
    copy = db + ".copy"
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(copy + suffix):
            os.remove(copy + suffix)
    shutil.copy(db, copy)
    c = sqlite3.connect(copy, isolation_level=None)
    for p in pragmas:
        c.execute(p)
    c.execute("PRAGMA journal_mode = WAL")
    c.execute(f"PRAGMA synchronous = {synchronous}")
    for t in drop:
        c.execute(f"DROP TRIGGER {t}")
    sid, head = c.execute("SELECT id, head FROM sessions ORDER BY number DESC LIMIT 1").fetchone()
    start = time.perf_counter()
    for i in range(TURNS):
        c.execute("BEGIN IMMEDIATE")
        if c.execute(INSERT, (sid, head + 1 + i, head + 1 + i, body)).rowcount != 1:
            sys.exit("the row did not go in: the store's schema has changed")
        c.execute("COMMIT")
        if i % 500 == 499:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    spent = time.perf_counter() - start
    c.close()
    return spent / TURNS * 1e6


def compressed(json_bytes, level, dictionary=None):
    """Microseconds per compression in a hot loop, and the bytes out."""
    d = zstandard.ZstdCompressionDict(dictionary, dict_type=zstandard.DICT_TYPE_RAWCONTENT) if dictionary else None
    z = zstandard.ZstdCompressor(level=level, dict_data=d)
    n = 20000
    out = z.compress(json_bytes)
    start = time.perf_counter()
    for _ in range(n):
        z.compress(json_bytes)
    return (time.perf_counter() - start) / n * 1e6, len(out)


def main():
    with tempfile.TemporaryDirectory() as directory:
        db, body = pirate_database(directory)
        json_bytes = zstandard.ZstdDecompressor().decompress(body)
        print(f"the row: {len(json_bytes)} B of JSON, {len(body)} B stored")
        for run in range(RUNS):
            every = commits(db, body)
            fewer = commits(db, body, drop=IDLE_TRIGGERS)
            exclusive = commits(db, body, pragmas=["PRAGMA locking_mode = EXCLUSIVE"])
            unsynced = commits(db, body, synchronous="OFF")
            print(f"commit a turn: {every:.1f} µs; without the four idle triggers {fewer:.1f} µs; "
                  f"exclusive locking {exclusive:.1f} µs; synchronous=OFF {unsynced:.1f} µs")
        templates = b"".join(
            open(os.path.join(ROOT, "prompts/pirate", f), "rb").read()
            for f in sorted(os.listdir(os.path.join(ROOT, "prompts/pirate")))
            if f.endswith(".j2")
        )
        for name, level, dictionary in [
            ("level 1", 1, None),
            ("level -1", -1, None),
            ("level 1, the templates as a dictionary", 1, templates),
        ]:
            us, size = compressed(json_bytes, level, dictionary)
            print(f"zstd {name}: {size} B, {us:.1f} µs")


if __name__ == "__main__":
    main()

"""The pirate turn of `cargo bench -p ruleweave --bench bindings`, played through the Python
package: a session on the stand-in model in memory, each turn a line a person typed, its
display read after it. Prints the median time per turn over ROUNDS rounds, in µs.

    python bench/bindings.py [ROUNDS] [TURNS_PER_ROUND]
"""

import pathlib
import statistics
import sys
import time

import ruleweave

ROOT = pathlib.Path(__file__).resolve().parents[1]
GAME_TURNS = 20


def round_of(engine, messages, turns):
    """The time `turns` turns take, in games of up to 20 turns, in ns."""
    total, played = 0, 0
    while played < turns:
        session = engine.open("pirate", {"difficulty": "hard"})
        for i in range(GAME_TURNS):
            if played == turns:
                break
            start = time.perf_counter_ns()
            turn = session.turn(messages[i % len(messages)])
            turn.display  # what a caller reads (made into Python objects when read)
            total += time.perf_counter_ns() - start
            played += 1
            if turn.finished:
                break
    return total


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    engine = ruleweave.Engine(ROOT, store="memory", model="standin")
    messages = (ROOT / "tests/data/pirate_messages.txt").read_text().splitlines()
    round_of(engine, messages, turns // 4)  # warm up: the pack loaded, caches filled
    per_turn = sorted(round_of(engine, messages, turns) / turns / 1000 for _ in range(rounds))
    print(
        f"python: pirate turn (stand-in model, in memory): median {statistics.median(per_turn):.1f} µs "
        f"(min {per_turn[0]:.1f}, max {per_turn[-1]:.1f}; {rounds} rounds of {turns} turns)"
    )


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# The Performance figures in one command: the engine's pirate bench, the LangGraph baseline, the
# engine's bench again (back to back, so both see the same machine), then the server under load
# with its own CPU time per turn and its memory. Prints a dated Markdown table with the ratios.
#
#   bash bench/run.sh                 (about 8 minutes once built; the first build, with whole-program
#                                     LTO, takes about ten more on two cores)
#   LOAD_SECONDS=20 CONVS=200 bash bench/run.sh
#
# env: VENV (default ${TMPDIR:-/var/tmp}/lgvenv; made with PyPI's langgraph when missing),
#      CONVS (LangGraph conversations of 20 turns per mode, default 100), LOAD_SECONDS (default 15),
#      CLIENTS (load generator clients, default 64), PORT (default 18080), CARGO_TARGET_DIR.
# Raw outputs stay in target/bench-run/.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-${TMPDIR:-/var/tmp}/lgvenv}
CONVS=${CONVS:-100}
LOAD_SECONDS=${LOAD_SECONDS:-15}
CLIENTS=${CLIENTS:-64}
PORT=${PORT:-18080}
TARGET=${CARGO_TARGET_DIR:-target}
OUT=target/bench-run
mkdir -p "$OUT"

echo "== building (release, and the bench profile)" >&2
cargo build --release -q -p ruleweave --bin ruleweave --example loadgen
cargo bench -q -p ruleweave-engine --bench pirate --no-run

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import langgraph, langgraph.checkpoint.sqlite' 2>/dev/null; then
  echo "== the LangGraph baseline's venv ($VENV)" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q langgraph langgraph-checkpoint-sqlite
fi
unset LANGSMITH_TRACING LANGCHAIN_TRACING_V2 LANGSMITH_API_KEY LANGCHAIN_API_KEY || true

engine_bench() {
  # bencher format: one line per bench, ns per iteration (a 20-turn conversation; the floor's
  # iteration is 100 turns).
  cargo bench -q -p ruleweave-engine --bench pirate -- --output-format bencher 'pirate/turn|floor/turn' 2>/dev/null | grep '^test ' >> "$OUT/engine.txt"
}

: > "$OUT/engine.txt"
: > "$OUT/langgraph.jsonl"
echo "== ruleweave, pirate turns (memory, SQLite) and the floor" >&2
engine_bench
echo "== LangGraph, the same pirate graph (MemorySaver, SqliteSaver, bare functions)" >&2
for mode in memory sqlite bare; do
  (cd bench/langgraph && "$VENV/bin/python" pirate_bench.py --mode "$mode" --turns 20 --convs "$CONVS" --warmup 10 --run 1) \
    | tail -n 1 >> "$OUT/langgraph.jsonl"
done
echo "== LangGraph, the floor (three trivial nodes, MemorySaver)" >&2
(cd bench/langgraph && "$VENV/bin/python" floor_bench.py --nodes 3 --mode memory --iters 1000 --warmup 100 --run 1) \
  | tail -n 1 >> "$OUT/langgraph.jsonl"
echo "== ruleweave again" >&2
engine_bench

echo "== the server under load (stand-in model, SQLite, $CLIENTS clients, ${LOAD_SECONDS}s)" >&2
rm -f "$OUT"/load.db*
"$TARGET/release/ruleweave" serve --store "sqlite://$PWD/$OUT/load.db" --addr "127.0.0.1:$PORT" > "$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
  kill -0 $SERVER 2>/dev/null || { cat "$OUT/serve.log" >&2; exit 1; }
  sleep 0.1
done
"$TARGET/release/examples/loadgen" --url "http://127.0.0.1:$PORT" --clients "$CLIENTS" --seconds "$LOAD_SECONDS" --pid $SERVER \
  > "$OUT/load.txt"
"$TARGET/release/examples/loadgen" --url "http://127.0.0.1:$PORT" --hold 5000 --pid $SERVER 2>/dev/null > "$OUT/hold.txt"
kill $SERVER; wait $SERVER 2>/dev/null || true
trap - EXIT

python3 - "$OUT" <<'EOF'
import datetime, json, os, re, sys
out = sys.argv[1]
engine = {}
for line in open(f"{out}/engine.txt"):
    m = re.match(r"test (.+?) \.\.\. bench:\s+([\d,]+) ns/iter", line)
    if m:
        # An iteration is one 20-turn conversation (the bench's TURNS), the floor's 100 turns.
        turns = 100 if m.group(1).startswith("floor/") else 20
        engine.setdefault(m.group(1), []).append(int(m.group(2).replace(",", "")) / turns / 1000)
lg = {(j["bench"], j["mode"]): j for j in map(json.loads, open(f"{out}/langgraph.jsonl"))}
def rng(xs):
    lo, hi = min(xs), max(xs)
    return f"{lo:,.1f} µs" if abs(hi - lo) < 0.05 else f"{lo:,.1f}–{hi:,.1f} µs"
def ratio(base, xs):
    lo, hi = base / max(xs), base / min(xs)
    return f"{lo:.0f}×" if round(lo) == round(hi) else f"{lo:.0f}–{hi:.0f}×"
mem = engine["pirate/turn (20-turn conversation, in memory)"]
sql = engine["pirate/turn (20-turn conversation, SQLite)"]
floor = engine["floor/turn (3 trivial script nodes, in memory)"]
lgm, lgs, bare = (lg["pirate", m]["turn"]["median_us"] for m in ("memory", "sqlite", "bare"))
lgf = lg["floor", "memory"]["invoke"]["median_us"]
load = open(f"{out}/load.txt").read()
hold = open(f"{out}/hold.txt").read()
tps = re.search(r"([\d.]+) turns/s; latency p50 ([\d.]+) ms, p99 ([\d.]+) ms.*?(\d+) errors", load)
cpu = re.search(r"([\d.]+) µs per turn .*?peak RSS (\d+) MB", load)
per = re.search(r"([\d.]+) bytes per session", hold)
print(f"Measured {datetime.date.today()} on {os.cpu_count()} cores, back to back "
      f"(ruleweave, LangGraph, ruleweave):\n")
print("| what | ruleweave | LangGraph | ratio (target) |")
print("| --- | --- | --- | --- |")
print(f"| pirate turn, in memory | {rng(mem)} | `MemorySaver` {lgm:,.0f} µs | **{ratio(lgm, mem)}** faster (200×) |")
print(f"| pirate turn, SQLite | {rng(sql)} | `SqliteSaver` {lgs:,.0f} µs | **{ratio(lgs, sql)}** faster (100×) |")
print(f"| the same logic as bare Python functions | | {bare:,.1f} µs | ruleweave in memory: {min(mem)/bare:.1f}× its time |")
print(f"| the floor: three trivial nodes, in memory | {rng(floor)} | `MemorySaver` {lgf:,.0f} µs | **{ratio(lgf, floor)}** faster |")
print(f"| server: turns/s (stand-in model, SQLite, load generator on the same cores) | {float(tps.group(1)):,.0f} "
      f"(p50 {tps.group(2)} ms, p99 {tps.group(3)} ms, {tps.group(4)} errors) | | 5,000 turns/s |")
print(f"| server: its own CPU per turn | {float(cpu.group(1)):,.0f} µs (peak RSS {cpu.group(2)} MB) | | ≤ 200 µs |")
print(f"| server: memory per held session (5,000 held, after the load run) | {float(per.group(1)) / 1000:,.1f} kB | | |")
EOF

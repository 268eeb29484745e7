#!/usr/bin/env bash
# The Performance figures in one command: the engine's pirate bench, the LangGraph baseline, the
# engine's bench again (back to back, so both see the same machine); the five packs at a remote
# model's pace (wall time against the critical path of their calls) and the same debate on
# LangGraph at that pace; the time to a streamed speech's first word over HTTP; then the server
# under load, with the stand-in model and with an instant native one, its own CPU time per turn
# and its memory. Prints a dated Markdown table with the ratios.
#
#   bash bench/run.sh                 (about 13 minutes once built; the first build, with
#                                     whole-program LTO, takes about fifteen more on two cores)
#   LOAD_SECONDS=20 CONVS=200 bash bench/run.sh
#
# env: VENV (default ${TMPDIR:-/var/tmp}/lgvenv; made from PyPI when missing, with the pinned
#      bench/langgraph/requirements.txt),
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
cargo build --release -q -p ruleweave --bin ruleweave --example loadgen --example instant_serve
cargo bench -q -p ruleweave-engine --bench pirate --bench latency --no-run
cargo bench -q -p ruleweave --bench first_word --no-run

# The baseline's pinned packages (bench/langgraph/requirements.txt): a venv made with other
# versions is brought to these.
if [ ! -x "$VENV/bin/python" ]; then
  echo "== the LangGraph baseline's venv ($VENV)" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
"$VENV/bin/pip" install -q -r bench/langgraph/requirements.txt
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

echo "== the five packs at a remote model's pace, then the same debate on LangGraph (about 3 minutes)" >&2
cargo bench -q -p ruleweave-engine --bench latency -- --json 2>/dev/null | grep '^{' > "$OUT/latency.jsonl"
(cd bench/langgraph && "$VENV/bin/python" debate_paced.py --debates 1 --rounds 3) | tail -n 1 >> "$OUT/langgraph.jsonl"
echo "== the first word of a streamed speech, over HTTP" >&2
cargo bench -q -p ruleweave --bench first_word -- --json 2>/dev/null | grep '^{' > "$OUT/first_word.jsonl"

wait_up() {
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$1/healthz" >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || { cat "$3" >&2; exit 1; }
    sleep 0.1
  done
}

echo "== the server under load (stand-in model, SQLite, $CLIENTS clients, ${LOAD_SECONDS}s)" >&2
rm -f "$OUT"/load.db* "$OUT"/instant.db*
"$TARGET/release/ruleweave" serve --store "sqlite://$PWD/$OUT/load.db" --addr "127.0.0.1:$PORT" > "$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
wait_up "$PORT" $SERVER "$OUT/serve.log"
"$TARGET/release/examples/loadgen" --url "http://127.0.0.1:$PORT" --clients "$CLIENTS" --seconds "$LOAD_SECONDS" --pid $SERVER \
  > "$OUT/load.txt"
"$TARGET/release/examples/loadgen" --url "http://127.0.0.1:$PORT" --hold 5000 --pid $SERVER 2>/dev/null > "$OUT/hold.txt"
kill $SERVER; wait $SERVER 2>/dev/null || true

echo "== the server under load with an instant native model (SQLite, $CLIENTS clients, ${LOAD_SECONDS}s)" >&2
"$TARGET/release/examples/instant_serve" "sqlite://$PWD/$OUT/instant.db" "127.0.0.1:$PORT" > "$OUT/instant.log" 2>&1 &
SERVER=$!
wait_up "$PORT" $SERVER "$OUT/instant.log"
"$TARGET/release/examples/loadgen" --url "http://127.0.0.1:$PORT" --clients "$CLIENTS" --seconds "$LOAD_SECONDS" --pid $SERVER \
  > "$OUT/instant_load.txt"
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
lg = {(j["bench"], j.get("mode")): j for j in map(json.loads, open(f"{out}/langgraph.jsonl"))}
lat = [json.loads(l) for l in open(f"{out}/latency.jsonl")]
first = json.loads(open(f"{out}/first_word.jsonl").read())
def rng(xs):
    lo, hi = min(xs), max(xs)
    return f"{lo:,.1f} µs" if abs(hi - lo) < 0.05 else f"{lo:,.1f}–{hi:,.1f} µs"
def ratio(base, xs):
    lo, hi = base / max(xs), base / min(xs)
    return f"{lo:.0f}×" if round(lo) == round(hi) else f"{lo:.0f}–{hi:.0f}×"
mem = engine["pirate/turn (20-turn conversation, in memory)"]
sql = engine["pirate/turn (20-turn conversation, SQLite)"]
floor = engine["floor/turn (3 trivial script nodes, in memory)"]
idle = next((v for k, v in engine.items() if k.startswith("pirate/") and "idle before each" in k), None)
lgm, lgs, bare = (lg["pirate", m]["turn"]["median_us"] for m in ("memory", "sqlite", "bare"))
lgf = lg["floor", "memory"]["invoke"]["median_us"]
load = open(f"{out}/load.txt").read()
hold = open(f"{out}/hold.txt").read()
tps = re.search(r"([\d.]+) turns/s; latency p50 ([\d.]+) ms, p99 ([\d.]+) ms.*?(\d+) errors", load)
cpu = re.search(r"([\d.]+) µs per turn .*?peak RSS (\d+) MB", load)
instant = open(f"{out}/instant_load.txt").read()
itps = re.search(r"([\d.]+) turns/s", instant)
icpu = re.search(r"([\d.]+) µs per turn", instant)
per = re.search(r"([\d.]+) bytes per session", hold)
print(f"Measured {datetime.date.today()} on {os.cpu_count()} cores, back to back "
      f"(ruleweave, LangGraph, ruleweave):\n")
print("| what | ruleweave | LangGraph | ratio (line to hold, or target) |")
print("| --- | --- | --- | --- |")
print(f"| pirate turn, in memory | {rng(mem)} | `MemorySaver` {lgm:,.0f} µs | **{ratio(lgm, mem)}** faster (hold ≥ 55×) |")
print(f"| pirate turn, SQLite | {rng(sql)} | `SqliteSaver` {lgs:,.0f} µs | **{ratio(lgs, sql)}** faster (hold ≥ 35×) |")
if idle:
    lo, hi = min(idle) / max(mem), max(idle) / min(mem)
    times = f"{lo:.1f}×" if round(lo, 1) == round(hi, 1) else f"{lo:.1f}–{hi:.1f}×"
    print(f"| the same pirate turn after its thread idles 0.3 ms (as a server's does between requests) | {rng(idle)} | | {times} the turn back to back |")
print(f"| the same logic as bare Python functions | | {bare:,.1f} µs | ruleweave in memory: {min(mem)/bare:.1f}× its time |")
print(f"| the floor: three trivial nodes, in memory | {rng(floor)} | `MemorySaver` {lgf:,.0f} µs | **{ratio(lgf, floor)}** faster (hold ≥ 400×) |")
packs = [j for j in lat if not j["label"].startswith("debate, canned")]
print("| a turn at a remote model's pace (0.3 s to the first token ±20%, 100 tokens/s, searches 0.5 s; SQLite): "
      "wall ÷ the critical path of its calls | " + " · ".join(f"{j['pack']} **{j['ratio']:.3f}**" for j in packs)
      + " | | ≤ 1.05 each |")
canned = next(j for j in lat if j["label"].startswith("debate, canned"))
lgd = lg["debate_paced", None]
print(f"| the same debate at that pace (3 rounds, strict, {canned['calls']} calls, canned answers, even calls) | "
      f"{canned['wall_ms'] / 1000:.2f} s (÷ critical path {canned['ratio']:.3f}) | async, `Send` fan-out: {lgd['wall_ms'] / 1000:.2f} s "
      f"(÷ critical path {lgd['ratio']:.3f}) | {lgd['wall_ms'] / canned['wall_ms']:.3f}× |")
print(f"| the first word of a streamed speech over HTTP, the server's share (median, worst of {first['debates']}): "
      f"turn event stream / chat face | {first['api_median_ms']:.2f} ms ({first['api_max_ms']:.2f}) / "
      f"{first['chat_median_ms']:.2f} ms ({first['chat_max_ms']:.2f}) | | ≤ 5 ms |")
print(f"| server: turns/s (stand-in model, SQLite, load generator on the same cores) | {float(tps.group(1)):,.0f} "
      f"(p50 {tps.group(2)} ms, p99 {tps.group(3)} ms, {tps.group(4)} errors) | | 5,000 turns/s |")
print(f"| server: its own CPU per turn, instant native model ({float(itps.group(1)):,.0f} turns/s) | **{float(icpu.group(1)):,.0f} µs** | | ≤ 200 µs |")
print(f"| server: its own CPU per turn, stand-in model (Rhai) | {float(cpu.group(1)):,.0f} µs (peak RSS {cpu.group(2)} MB) | | |")
print(f"| server: memory per held session (5,000 held, after the load run) | {float(per.group(1)) / 1000:,.1f} kB | | |")
EOF

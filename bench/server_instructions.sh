#!/usr/bin/env bash
# The instructions `ruleweave serve` spends per pirate turn, counted by Callgrind (the machines
# this project runs on expose no hardware counters to `perf stat`): the server plays
# bench/server_turns.py's fixed conversations on SQLite with the stand-in model, from a root
# holding the pirate pack alone (no lobby pack, so no round sweep runs between requests).
#
#     bench/server_instructions.sh PATH/TO/ruleweave [CONVERSATIONS]
#
# Two conversations warm the server up; the counters are zeroed, CONVERSATIONS (default 5, 20
# turns each) are played, and the counts dumped: every thread of the server, user space only
# (the kernel's share of a commit is not counted). Prints `turns`, `instructions` and
# `per_turn`. Run it on two builds to compare them: the client is the same script, so the
# workload is held fixed; PACKS=DIR takes the pirate pack from another checkout (an older build
# may not read this one's manifest), which must then be the same pack for both; KEEP=FILE keeps
# Callgrind's profile of the counted turns.
set -euo pipefail
bin=$(realpath "$1")
conversations=${2:-5}
repo=$(cd "$(dirname "$0")/.." && pwd)
port=${PORT:-18181}
work=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/root/config" "$work/root/scripts" "$work/root/prompts"
packs=${PACKS:-$repo}
cp "$packs/config/pirate.yaml" "$work/root/config/"
cp -r "$packs/scripts/pirate" "$work/root/scripts/"
cp -r "$packs/prompts/pirate" "$work/root/prompts/"
(cd "$work/root" && exec valgrind --tool=callgrind --cache-sim=no --callgrind-out-file="$work/cg.out" \
  "$bin" serve --store "sqlite://$work/turns.db" --addr "127.0.0.1:$port") 2> "$work/serve.log" &
server=$!
for _ in $(seq 1 600); do
  grep -q "listening on" "$work/serve.log" && break
  kill -0 "$server" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
  sleep 0.1
done
python3 "$repo/bench/server_turns.py" "http://127.0.0.1:$port" 2 > /dev/null
callgrind_control --zero "$server" > /dev/null
turns=$(python3 "$repo/bench/server_turns.py" "http://127.0.0.1:$port" "$conversations")
callgrind_control --dump "$server" > /dev/null
dump=$(ls "$work"/cg.out.* | sort -V | tail -n 1)
instructions=$(awk '/^(summary|totals):/ { print $2; exit }' "$dump")
# KEEP=FILE keeps the profile, for callgrind_annotate (which function the instructions went to).
if [ -n "${KEEP:-}" ]; then cp "$dump" "$KEEP"; fi
[ "$turns" -gt 0 ] || { echo "no turn was played" >&2; exit 1; }
echo "turns $turns"
echo "instructions $instructions"
echo "per_turn $((instructions / turns))"

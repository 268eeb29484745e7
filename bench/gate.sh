#!/usr/bin/env bash
# The instruction-count gate: host/benches/instructions.rs run under Valgrind's Callgrind through
# gungraun, each benchmark's instructions compared with its baseline in bench/instructions.json.
# It fails when one grows more than 3% over its baseline, and says which: the benchmark, the
# baseline, the new count and the difference. A change meant to cost more writes the new counts
# in the same commit (`--update`) and says why in its message. Valgrind and python3 must be
# installed (.ci/run installs them); gungraun's runner is installed here, at the library's version.
#
#     bash bench/gate.sh            # the gate: exit 1 past 3%
#     bash bench/gate.sh --update   # the counts become the baselines
#
# The build is the `gate` profile (the release profile's optimisation without its whole-program
# link, which would take the gate's minutes), so the counts compare with counts of that profile
# only; Callgrind's counts are the same from run to run within a few tenths of a percent.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(awk '/^name = "gungraun"$/ { getline; sub(/^version = "/, ""); sub(/"$/, ""); print; exit }' Cargo.lock)
runner_root=${CARGO_TARGET_DIR:-target}/gungraun-runner
if ! "$runner_root/bin/gungraun-runner" --version 2>/dev/null | grep -qF "$version"; then
  echo "== gungraun-runner $version" >&2
  cargo install -q gungraun-runner --version "$version" --locked --root "$runner_root"
fi
export PATH="$(cd "$runner_root/bin" && pwd):$PATH"
summaries=${CARGO_TARGET_DIR:-target}/gungraun
rm -rf "$summaries/ruleweave/instructions"
cargo bench -q -p ruleweave --profile gate --features instructions --bench instructions -- \
  --save-summary=json
python3 bench/gate.py "$summaries" "$@"

#!/usr/bin/env bash
# What the Python and Node packages cost per turn: the same pirate turn (stand-in model, in
# memory) from Rust (criterion), through the Python package and through the Node package, then
# from Rust again, back to back on release builds (fat LTO, as the packages ship).
#
#   bash bench/bindings.sh        (about 25 minutes the first time on two cores: three release
#                                 builds of the engine's dependents; a few minutes after)
#
# env: VENV (default target/bench-bindings-venv). Raw outputs stay in target/bench-run/.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-target/bench-bindings-venv}
OUT=target/bench-run
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
mkdir -p "$OUT"

echo "== building the Python package (release)" >&2
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
MATURIN_PEP517_ARGS="--target $TRIPLE" "$VENV/bin/pip" install -q ./python
echo "== building the Node package (release)" >&2
(cd node && npm ci --no-audit --no-fund --ignore-scripts >/dev/null && node build.js --target "$TRIPLE" >/dev/null)
echo "== building the Rust bench" >&2
cargo bench -q -p ruleweave --bench bindings --target "$TRIPLE" --no-run

rust() { cargo bench -q -p ruleweave --bench bindings --target "$TRIPLE" 2>/dev/null | tee -a "$OUT/bindings-rust.txt" | grep -A2 "^bindings/"; }
: >"$OUT/bindings-rust.txt"
echo "== Rust" >&2; rust
echo "== Python" >&2; "$VENV/bin/python" bench/bindings.py | tee "$OUT/bindings-python.txt"
echo "== Node" >&2; node bench/bindings.js | tee "$OUT/bindings-node.txt"
echo "== Rust again" >&2; rust

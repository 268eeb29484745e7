#!/usr/bin/env python3
"""The instruction-count gate's judgement (bench/gate.sh runs it after the benchmarks).

    bench/gate.py SUMMARIES_DIR [--update]

Reads gungraun's summary.json of each benchmark of host/benches/instructions.rs under
SUMMARIES_DIR, and compares its instructions (Callgrind's Ir, every thread) with its baseline in
bench/instructions.json: prints a line per benchmark (baseline, new count, difference, and the
estimated cycles beside them) and exits 1 when any grew more than LIMIT_PCT over its baseline,
or has no baseline, or a baseline has no benchmark. With --update it writes the counts as the
new baselines instead. Standard library only.
"""
import json
import os
import sys

LIMIT_PCT = 3.0
HERE = os.path.dirname(os.path.abspath(__file__))
BASELINES = os.path.join(HERE, "instructions.json")


def number(metric):
    """The new run's value of a metric in gungraun's summary (`{"values": {"new": n, ...}}`)."""
    return metric["values"]["new"]


def counts(summaries):
    found = {}
    for folder, _, files in os.walk(summaries):
        if "summary.json" not in files:
            continue
        summary = json.load(open(os.path.join(folder, "summary.json")))
        if not summary["module_path"].startswith("instructions::"):
            continue
        name = summary["function_name"]
        callgrind = next((p for p in summary["profiles"] if p["tool"] == "Callgrind"), None)
        if callgrind is None:
            sys.exit(f"gate: {name} has no Callgrind profile (did it fail?): {folder}")
        metrics = callgrind["data"]["total"]["metrics"]
        found[name] = {"instructions": number(metrics["Ir"]), "estimated_cycles": number(metrics["EstimatedCycles"])}
    return found


def main():
    summaries, update = sys.argv[1], "--update" in sys.argv[2:]
    new = counts(summaries)
    if not new:
        sys.exit(f"gate: no benchmark summaries under {summaries}")
    if update:
        with open(BASELINES, "w") as f:
            json.dump(dict(sorted(new.items())), f, indent=2)
            f.write("\n")
        print(f"gate: {len(new)} baselines written to bench/instructions.json")
        return
    baselines = json.load(open(BASELINES))
    failed = []
    print(f"{'benchmark':<24} {'baseline':>14} {'new':>14} {'difference':>11}   estimated cycles (baseline -> new)")
    for name in sorted(set(new) | set(baselines)):
        if name not in baselines:
            failed.append(f"{name} has no baseline (bench/gate.sh --update writes one)")
            continue
        if name not in new:
            failed.append(f"{name} has a baseline but did not run")
            continue
        old, now = baselines[name]["instructions"], new[name]["instructions"]
        diff = (now - old) * 100.0 / old
        mark = "  FAIL" if diff > LIMIT_PCT else "  (cheaper: --update keeps the gain)" if diff < -LIMIT_PCT else ""
        print(f"{name:<24} {old:>14,} {now:>14,} {diff:>+10.2f}%   "
              f"{baselines[name]['estimated_cycles']:,} -> {new[name]['estimated_cycles']:,}{mark}")
        if diff > LIMIT_PCT:
            failed.append(f"{name}: {old:,} -> {now:,} instructions ({diff:+.2f}%, the limit is +{LIMIT_PCT}%)")
    if failed:
        print("\ngate: failed")
        for line in failed:
            print(f"  {line}")
        print("A change meant to cost more writes the new counts (bash bench/gate.sh --update) in the same "
              "commit and says why in its message.")
        sys.exit(1)
    print(f"\ngate: every count within +{LIMIT_PCT}% of its baseline")


if __name__ == "__main__":
    main()

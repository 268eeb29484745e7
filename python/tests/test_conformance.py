"""The conformance cases (tests/conformance/*.yaml) through the installed Python package: the
same replies, status lines and final state (its SHA-256 as canonical JSON) as the Rust engine."""

import hashlib
import json

import pytest
import ruleweave
import yaml

from conftest import ROOT

CASES = sorted((ROOT / "tests" / "conformance").glob("*.yaml"))


def canonical(v) -> str:
    """Canonical JSON, as the Rust and Node runners write it: keys sorted, no blank space, a whole
    number as an integer, any other number rounded to 9 decimals with trailing zeros dropped."""
    if v is None or isinstance(v, (bool, str)):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.9f}".rstrip("0").rstrip(".")
    if isinstance(v, list):
        return "[" + ",".join(canonical(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + canonical(v[k]) for k in sorted(v)) + "}"
    raise TypeError(f"not JSON: {v!r}")


def without(v, volatile):
    """`v` without the keys named in `volatile`, at any depth."""
    if isinstance(v, dict):
        return {k: without(x, volatile) for k, x in v.items() if k not in volatile}
    if isinstance(v, list):
        return [without(x, volatile) for x in v]
    return v


def test_canonical_json_is_the_same_in_every_language():
    got = canonical({"b": [1, 2.0, 0.1, 1.0e-7, -3.25], "a": 'x\n"y"', "c": None})
    assert got == r'{"a":"x\n\"y\"","b":[1,2,0.1,0.0000001,-3.25],"c":null}'


def test_there_is_a_case_of_every_pack():
    stems = [c.stem for c in CASES]
    for pack in ["debate", "designer", "interview", "party", "pirate"]:
        assert any(s.startswith(pack) for s in stems), stems


@pytest.mark.parametrize("path", CASES, ids=[c.stem for c in CASES])
def test_a_conformance_case_plays_as_on_the_rust_engine(path):
    case = yaml.safe_load(path.read_text())
    engine = ruleweave.Engine(ROOT, model="standin")
    session = engine.open(case["pack"], case.get("options") or {}, id=case["id"])
    shown = []
    for move in case["inputs"]:
        turn = session.turn(move)
        shown.append({"reply": turn.display.get("reply"), "status": turn.display.get("status")})
    state = without(session.state(), set(case.get("volatile", [])))
    digest = hashlib.sha256(canonical(state).encode("utf-8")).hexdigest()
    assert shown == case["expect"]["turns"]
    assert digest == case["expect"]["state_sha256"]

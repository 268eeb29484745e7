"""The Python package as an app uses it: a pirate game on the stand-in, resumed in another
process from SQLite, a batch of simulated games, a model of the app's own, a turn that does not
hold the event loop, and bad input answered by typed errors."""

import asyncio
import json
import subprocess
import sys
import textwrap
import threading

import pytest
import ruleweave

from conftest import ROOT


def test_the_pirate_plays_resumes_in_another_process_and_simulates(tmp_path):
    store = f"sqlite://{tmp_path / 'games.db'}"
    engine = ruleweave.Engine(ROOT, store=store, model="standin")
    assert {"pirate", "party", "interview", "designer", "debate"} <= set(engine.packs())
    session = engine.open("pirate", {"difficulty": "medium"})
    moves = [
        "Ahoy, captain! I am the harbour master's daughter.",
        "I sailed with your brother off Tortuga.",
        "Please, I will pay you in gold doubloons.",
    ]
    for number, move in enumerate(moves, start=1):
        turn = session.turn(move)
        assert turn.turn == number
        # The captain's words are the reply; the status line says where the merit stands.
        assert turn.display["reply"] == turn.state["pirate_response"] != ""
        assert turn.display["status"].startswith("merit "), turn.display
        assert turn.output["pirate_response"] == turn.display["reply"]
        assert any(e["type"] == "llm" for e in turn.events)
        assert not turn.finished
    assert session.turns == 3

    # A new process (the app restarted) goes on with the stored session.
    script = textwrap.dedent(
        f"""
        import ruleweave
        engine = ruleweave.Engine({str(ROOT)!r}, store={store!r}, model="standin")
        session = engine.reopen({session.id!r})
        print(session.turns, session.state()["conversation_history"][-1]["content"])
        print(session.turn("Do you remember me, captain?").turn)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first == f"3 {turn.display['reply']}"
    assert second == "4"

    # Two hundred simulated games, the report `ruleweave simulate --json` prints.
    report = engine.simulate("pirate", games=200, players=["liar"], options={"difficulty": "easy"}, seed="py")
    (liar,) = report["players"]
    assert (report["pack"], report["games"], report["max_turns"], liar["games"]) == ("pirate", 200, 20, 200)
    assert abs(sum(o["share"] for o in liar["outcomes"].values()) - 1) < 1e-9
    assert liar["outcomes"]["won_agreement"]["share"] > 0.5, liar["outcomes"]


def test_a_model_of_the_apps_own_answers_the_judge_and_the_captain():
    calls = []

    def model(request):
        calls.append(request)
        if request["profile"] == "judge":
            assert request["response_format"] == {"type": "json_object"}
            return json.dumps({"total_score": 30, "reasoning": "a fine tale"})
        return "Arr, a fine tale, but my treasure stays with me."

    engine = ruleweave.Engine(ROOT, model=model)
    turn = engine.open("pirate", {"difficulty": "medium"}).turn("Ahoy! I bring word from Tortuga.")
    assert [c["profile"] for c in calls] == ["judge", "pirate"]
    judge, captain = calls
    assert "Ahoy! I bring word from Tortuga." in judge["messages"][-1]["content"]
    assert captain["messages"][0]["role"] == "system" and captain["model"] == "gpt-4o-mini"
    assert turn.display["reply"] == "Arr, a fine tale, but my treasure stays with me."
    assert turn.state["merit_score"] == 30
    llm = [e for e in turn.events if e["type"] == "llm"]
    assert [e["provider"] for e in llm] == ["python", "python"]


def test_a_model_that_raises_takes_the_fallback_path_and_says_so():
    def model(request):
        raise RuntimeError("the model server is down")

    engine = ruleweave.Engine(ROOT, model=model)
    session = engine.open("pirate")
    turn = session.turn("Ahoy, captain!")
    notes = " ".join(turn.display["notes"])
    assert "the model server is down" in notes, turn.display
    assert turn.state["merit_breakdown"]["source"] != "judge"
    # The process is up and the session goes on.
    assert session.turn("Still there?").turn == 2


def test_a_coroutine_model_is_awaited():
    async def model(request):
        await asyncio.sleep(0)
        return json.dumps({"total_score": 12}) if request["profile"] == "judge" else "Arr."

    turn = ruleweave.Engine(ROOT, model=model).open("pirate").turn("Ahoy!")
    assert (turn.display["reply"], turn.state["merit_score"]) == ("Arr.", 12)


def test_turn_async_lets_other_coroutines_run():
    # The model waits for a coroutine of the app's loop: if the turn held the loop (or the
    # interpreter), that coroutine could never run and the wait would run out.
    gate = threading.Event()

    def model(request):
        if not gate.wait(timeout=20):
            raise RuntimeError("the event loop was held during the turn")
        return json.dumps({"total_score": 5}) if request["profile"] == "judge" else "Arr, go on."

    async def main():
        engine = ruleweave.Engine(ROOT, model=model)
        session = await engine.open_async("pirate")
        ticks = []

        async def other():
            await asyncio.sleep(0)
            ticks.append("the loop ran")
            gate.set()

        turn, _ = await asyncio.gather(session.turn_async("Ahoy!"), other())
        return turn, ticks

    turn, ticks = asyncio.run(main())
    assert ticks == ["the loop ran"]
    assert turn.display["reply"] == "Arr, go on."


@pytest.fixture
def broken_root(tmp_path):
    """A root with one pack whose manifest is broken at a known place."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "broken.yaml").write_text("name: broken\ngraph: [\n")
    return tmp_path


def test_bad_input_raises_the_typed_error_with_its_place(broken_root):
    engine = ruleweave.Engine(ROOT, model="standin")
    with pytest.raises(ruleweave.NotFoundError) as e:
        engine.open("no_such_pack")
    assert (e.value.kind, e.value.place) == ("not_found", None)
    with pytest.raises(ruleweave.InputError) as e:
        engine.open("pirate", {"difficulty": "impossible"})
    assert e.value.kind == "invalid_input" and "difficulty" in e.value.message
    with pytest.raises(ruleweave.InputError):
        engine.open("pirate", ["not", "a", "dict"])
    session = engine.open("pirate")
    with pytest.raises(ruleweave.InputError) as e:
        session.turn(12)
    assert "an input is a map of fields" in str(e.value)
    # The party refuses a line in its own words: the message is the player's, the flag says so.
    party = engine.open("party", {"players": "ana,bo"})
    party.turn({})
    with pytest.raises(ruleweave.InputError) as e:
        party.turn("yes")
    assert e.value.refusal and e.value.message.startswith("yes is not a player"), e.value.message
    # A pack that does not load names the place.
    with pytest.raises(ruleweave.PackError) as e:
        ruleweave.Engine(broken_root, model="standin").open("broken")
    assert e.value.kind == "invalid_pack"
    assert e.value.place["file"] == "config/broken.yaml" and e.value.place["line"] >= 2, e.value.place
    # A store that cannot open, and a root that holds no packs.
    with pytest.raises(ruleweave.StoreError):
        ruleweave.Engine(ROOT, store="postgres://nobody@127.0.0.1:1/none", model="standin")
    with pytest.raises(ruleweave.NotFoundError):
        ruleweave.Engine(ROOT / "nowhere")
    with pytest.raises(ruleweave.InputError):
        ruleweave.Engine(ROOT, model=42)
    # Every error is a ruleweave.Error, and the process is up: the session still plays.
    assert issubclass(ruleweave.StoreError, ruleweave.Error)
    assert session.turn("Ahoy!").turn == 1


def test_a_player_plays_their_variant_and_keeps_it(tmp_path):
    """A pack with an experiment: a session opened for a player plays that player's variant (a
    coin that always loses on its own rules, always wins in the ``sure`` variant), says which,
    and a player keeps their variant; a player of 10 KB is refused."""
    import shutil

    root = tmp_path / "coin"
    shutil.copytree(ROOT / "tests" / "packs" / "coin", root)
    manifest = root / "config" / "coin.yaml"
    text = manifest.read_text().replace("  chance: 50\n", "  chance: 0\n")
    manifest.write_text(
        text + "experiment:\n  name: kinder-coin\n  variants:\n"
        "    fair: {weight: 50}\n    sure: {weight: 50, params: {chance: 100}}\n"
    )
    engine = ruleweave.Engine(root, model="standin")
    seen = set()
    for i in range(12):
        player = f"player-{i}"
        session = engine.open("coin", player=player)
        assert session.variant in ("fair", "sure")
        assert engine.open("coin", player=player).variant == session.variant
        turn = session.turn({"side": "heads"})
        assert turn.state["outcome"] == ("won" if session.variant == "sure" else "lost"), session.variant
        seen.add(session.variant)
    assert seen == {"fair", "sure"}
    assert engine.open("coin").variant in ("fair", "sure")
    with pytest.raises(ruleweave.InputError) as e:
        engine.open("coin", player="x" * 10_240)
    assert e.value.message == "a player is 1 to 128 characters, not 10240"
    # A pack without an experiment plays no variant.
    assert ruleweave.Engine(ROOT, model="standin").open("pirate", player="ada").variant is None

"""The FastAPI app of python/examples, as its clients see it: a game started, moves played with
the captain's words and the status line answered, the engine's errors as JSON with their
status, and a game read back from the store after the app restarts."""

import importlib.util
import pathlib

from conftest import ROOT
from fastapi.testclient import TestClient

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "fastapi_app.py"


def start_app(monkeypatch, store: str):
    """The example app, imported afresh (a new process, as far as its memory goes)."""
    monkeypatch.setenv("RULEWEAVE_ROOT", str(ROOT))
    monkeypatch.setenv("RULEWEAVE_STORE", store)
    spec = importlib.util.spec_from_file_location("fastapi_app", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return TestClient(module.app)


def test_the_fastapi_app_serves_a_pirate_game_and_resumes_it(monkeypatch, tmp_path):
    store = f"sqlite://{tmp_path / 'games.db'}"
    client = start_app(monkeypatch, store)

    r = client.post("/games", json={"pack": "pirate", "options": {"difficulty": "easy"}})
    assert r.status_code == 200, r.text
    game = r.json()
    assert game["view"]["status"] == "merit 0/100, needs 40 on easy"
    assert game["view"]["reply"] is None

    r = client.post(f"/games/{game['id']}/moves", json={"message": "Ahoy, captain! I bring news from Tortuga."})
    assert r.status_code == 200, r.text
    first = r.json()
    assert first["turn"] == 1
    assert first["reply"], first
    assert first["status"].startswith("merit ") and first["status"].endswith("needs 40 on easy"), first

    # The engine's errors are the client's to read.
    r = client.post("/games", json={"pack": "pirate", "options": {"difficulty": "insane"}})
    assert (r.status_code, r.json()["error"]) == (422, "invalid_input")
    assert r.json()["message"] == "option `difficulty` must be one of easy, medium, hard, not insane"
    r = client.post("/games", json={"pack": "chess"})
    assert (r.status_code, r.json()["error"]) == (404, "not_found")
    r = client.post("/games/no-such-game/moves", json={"message": "hello"})
    assert (r.status_code, r.json()) == (404, {"error": "not_found", "message": "there is no session no-such-game"})

    # The app restarts: the game is read back from the store and goes on from turn 1.
    client = start_app(monkeypatch, store)
    r = client.get(f"/games/{game['id']}")
    assert r.status_code == 200, r.text
    assert (r.json()["turns"], r.json()["view"]["reply"]) == (1, first["reply"])
    r = client.post(f"/games/{game['id']}/moves", json={"message": "Do you remember me, captain?"})
    assert (r.status_code, r.json()["turn"]) == (200, 2)

"""A FastAPI app that serves ruleweave's packs: start a game, play a move, read where it stands.

    pip install ./python fastapi uvicorn
    RULEWEAVE_ROOT=. uvicorn fastapi_app:app --app-dir python/examples
    curl -s localhost:8000/games -H 'content-type: application/json' -d '{"pack": "pirate"}'
    curl -s localhost:8000/games/ID/moves -H 'content-type: application/json' -d '{"message": "Ahoy!"}'

One engine serves every request. Turns are awaited with ``turn_async``, so the app answers other
requests while a turn's model calls are out; a game this process has not seen (it restarted, or
another replica started it) is read back from the store.
"""

import os
from typing import Any, Dict, Optional

import ruleweave
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel

engine = ruleweave.Engine(
    os.environ.get("RULEWEAVE_ROOT", "."),
    store=os.environ.get("RULEWEAVE_STORE", "sqlite://games.db"),
    model="standin",  # or None for the models the environment names, or a function of your own
)
app = FastAPI(title="Games on ruleweave")
games: Dict[str, ruleweave.Session] = {}


class NewGame(BaseModel):
    pack: str
    options: Optional[Dict[str, Any]] = None


class Move(BaseModel):
    message: str


# The engine's errors, as HTTP: the pack's own refusals and bad input are the client's to fix.
STATUS = {"invalid_input": 422, "not_found": 404, "finished": 409, "conflict": 409}


@app.exception_handler(ruleweave.Error)
async def engine_error(_request, e: ruleweave.Error) -> JSONResponse:
    return JSONResponse({"error": e.kind, "message": e.message}, status_code=STATUS.get(e.kind, 500))


def game(id: str) -> ruleweave.Session:
    """A game live in this process, or read back from the store."""
    if id not in games:
        games[id] = engine.reopen(id)
    return games[id]


@app.post("/games")
async def new_game(new: NewGame) -> Dict[str, Any]:
    session = await engine.open_async(new.pack, new.options)
    games[session.id] = session
    return {"id": session.id, "view": session.view()}


@app.post("/games/{id}/moves")
async def play(id: str, move: Move) -> Dict[str, Any]:
    turn = await game(id).turn_async(move.message)
    return {"turn": turn.turn, **turn.display}


@app.get("/games/{id}")
async def view(id: str) -> Dict[str, Any]:
    session = game(id)
    return {"turns": session.turns, "finished": session.finished, "view": session.view()}

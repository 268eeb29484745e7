"""ruleweave: an embeddable rules engine for LLM-driven games.

Packs (YAML, Rhai scripts and minijinja templates under a root folder) are loaded by an
:class:`Engine`; each :class:`Session` plays turns of one pack. Every call that plays, loads
or simulates releases the interpreter while it runs, and ``Session.turn_async`` /
``Engine.open_async`` let an event loop serve other coroutines meanwhile.

Errors are :class:`Error` subclasses carrying ``.kind`` (the engine's error code, such as
``"invalid_input"``), ``.place`` (``{"file", "line", "column"}`` or ``None``) and ``.message``.
"""

from ._ruleweave import (
    Engine,
    Error,
    FinishedError,
    InputError,
    InternalError,
    ModelError,
    NotFoundError,
    PackError,
    ScriptError,
    Session,
    StoreError,
    Turn,
    version,
)

__version__ = version()

__all__ = [
    "Engine",
    "Session",
    "Turn",
    "Error",
    "PackError",
    "InputError",
    "NotFoundError",
    "FinishedError",
    "ScriptError",
    "ModelError",
    "StoreError",
    "InternalError",
    "version",
]

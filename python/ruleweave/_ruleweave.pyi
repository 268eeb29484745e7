"""Type stubs of the native module (``ruleweave._ruleweave``)."""

from os import PathLike
from typing import Any, Awaitable, Callable, Dict, List, Optional, Union, final

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

# Names of the stubs alone (nothing at runtime is called this).
_Json = Any
_ModelFunction = Callable[[Dict[str, Any]], Union[str, Awaitable[str]]]

class Error(Exception):
    """An error of the ruleweave engine."""

    kind: str
    """The engine's error code: ``invalid_pack``, ``invalid_input``, ``not_found``, ..."""
    place: Optional[Dict[str, Any]]
    """Where in the pack: ``{"file", "line", "column"}``, or ``None``."""
    message: str
    """What went wrong, without the place."""
    refusal: bool
    """Whether the pack refused the input in its own words (``message`` is for the player)."""

class PackError(Error): ...
class InputError(Error): ...
class NotFoundError(Error): ...
class FinishedError(Error): ...
class ScriptError(Error): ...
class ModelError(Error): ...
class StoreError(Error): ...
class InternalError(Error): ...

@final
class Turn:
    """What a turn did."""

    @property
    def turn(self) -> int:
        """The turn's number (1 for the first)."""
    @property
    def display(self) -> Dict[str, Any]:
        """What a person sees: ``reply``, ``status``, ``details``, ``finished``, ``notes``."""
    @property
    def output(self) -> Dict[str, _Json]:
        """The pack's output fields after the turn."""
    @property
    def state(self) -> Dict[str, _Json]:
        """The state after the turn."""
    @property
    def events(self) -> List[Dict[str, Any]]:
        """Everything the turn did, in order."""
    @property
    def finished(self) -> bool:
        """Whether the session is over now."""

@final
class Session:
    """One session of a pack."""

    @property
    def id(self) -> str:
        """The session's id (what ``Engine.reopen`` takes)."""
    @property
    def variant(self) -> Optional[str]:
        """The variant of its pack's experiment it plays (``None`` when the pack has none)."""
    @property
    def turns(self) -> int:
        """Turns played."""
    @property
    def finished(self) -> bool:
        """Whether the session is over."""
    def turn(self, input: Union[str, Dict[str, _Json]]) -> Turn:
        """Plays a turn: a dict of the pack's input fields, or a line a person typed."""
    def turn_async(self, input: Union[str, Dict[str, _Json]]) -> Awaitable[Turn]:
        """``turn`` as an awaitable; the event loop runs other coroutines meanwhile."""
    def view(self) -> Dict[str, Any]:
        """What a person sees now (before the first turn: the opening)."""
    def state(self) -> Dict[str, _Json]:
        """The session's state."""

@final
class Engine:
    """A pack's games and sessions, on the packs under ``root``."""

    def __new__(
        cls,
        root: Union[str, PathLike[str]],
        store: str = "memory",
        model: Union[None, str, _ModelFunction] = None,
    ) -> "Engine": ...
    def packs(self) -> List[str]:
        """The names of the packs under the root."""
    def describe(self, pack: str) -> Dict[str, Any]:
        """What a pack declares: options, input, output, state fields, what to type."""
    def open(
        self,
        pack: str,
        options: Optional[Dict[str, _Json]] = None,
        id: Optional[str] = None,
        player: Optional[str] = None,
    ) -> Session:
        """Opens a session (``id`` chooses its id, which also seeds its randomness; ``player``
        is who plays, the key a pack's experiment chooses the session's variant by)."""
    def open_async(
        self,
        pack: str,
        options: Optional[Dict[str, _Json]] = None,
        id: Optional[str] = None,
        player: Optional[str] = None,
    ) -> Awaitable[Session]:
        """``open`` as an awaitable."""
    def reopen(self, id: str) -> Session:
        """A stored session, by its id."""
    def simulate(
        self,
        pack: str,
        games: int = 100,
        players: Optional[List[str]] = None,
        seed: str = "ruleweave",
        options: Optional[Dict[str, _Json]] = None,
        jobs: Optional[int] = None,
    ) -> Dict[str, Any]:
        """The report ``ruleweave simulate --json`` prints, as a dict."""

def version() -> str:
    """The engine's version."""

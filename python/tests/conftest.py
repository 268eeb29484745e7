"""What the Python package's tests share: the repository's root (its packs) and the engine."""

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def root() -> pathlib.Path:
    """The repository's root: config/, scripts/, prompts/ of the shipped packs."""
    return ROOT

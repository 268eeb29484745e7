"""`ruleweave lsp` under pytest-lsp, a client nobody here wrote, on a copy of the shipped packs.

RULEWEAVE_BIN names the binary (the Rust test that runs these sets it); RULEWEAVE_ROOT the
repository whose packs are copied.
"""

import asyncio
import os
import pathlib
import shutil
import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

REPO = pathlib.Path(os.environ.get("RULEWEAVE_ROOT", pathlib.Path(__file__).resolve().parents[2]))
BIN = os.environ.get("RULEWEAVE_BIN", "ruleweave")
PACKS = ["config", "scripts", "prompts", "data", "schemas", "tests"]

_root = None


def pack_root() -> pathlib.Path:
    """One copy of the packs for the run: edits in buffers never reach it; tests that save copy their own."""
    global _root
    if _root is None:
        import tempfile

        _root = pathlib.Path(tempfile.mkdtemp(prefix="ruleweave-lsp-"))
        for d in PACKS:
            if (REPO / d).is_dir():
                shutil.copytree(REPO / d, _root / d)
    return _root


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[BIN, "lsp"]))
async def client(lsp_client: LanguageClient):
    root = pack_root()
    params = types.InitializeParams(
        capabilities=types.ClientCapabilities(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="packs")],
    )
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


def uri(rel: str) -> str:
    return (pack_root() / rel).as_uri()


def text(rel: str) -> str:
    return (pack_root() / rel).read_text()


def open_doc(client: LanguageClient, rel: str, body: str, language: str = "rhai", version: int = 1):
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri(rel), language_id=language, version=version, text=body)
        )
    )


def change_doc(client: LanguageClient, rel: str, body: str, version: int):
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri(rel), version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=body)],
        )
    )


async def diagnostics(client: LanguageClient, rel: str, until, seconds: float = 20.0):
    """The diagnostics of `rel` once `until(list)` holds: waits on publishDiagnostics, bounded."""
    key = uri(rel)

    async def settle():
        while True:
            got = client.diagnostics.get(key)
            if got is not None and until(list(got)):
                return list(got)
            await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

    try:
        return await asyncio.wait_for(settle(), seconds)
    except asyncio.TimeoutError:
        pytest.fail(f"no diagnostics of {rel} as expected within {seconds}s; last: {client.diagnostics.get(key)}")

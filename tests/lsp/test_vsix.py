"""The VS Code extension as people install it: the .vsix that vsce packed (RULEWEAVE_VSIX, made by
.ci/run), holding the client that starts `ruleweave lsp`, the Rhai grammar, and the manifest's
JSON Schema as the engine writes it."""

import json
import os
import pathlib
import zipfile

import pytest

from conftest import REPO


def vsix():
    path = os.environ.get("RULEWEAVE_VSIX")
    if not path:
        if os.environ.get("CI") == "true":
            pytest.fail("RULEWEAVE_VSIX is not set, and CI must package the VS Code extension")
        pytest.skip("RULEWEAVE_VSIX is not set")
    return zipfile.ZipFile(path)


def test_the_package_starts_the_server_on_pack_files():
    with vsix() as z:
        manifest = json.loads(z.read("extension/package.json"))
        client = z.read("extension/extension.js").decode()
        grammar = json.loads(z.read("extension/syntaxes/rhai.tmLanguage.json"))
        names = z.namelist()
    assert manifest["main"] == "./extension.js"
    assert 'args: ["lsp"]' in client
    assert "**/config/*.yaml" in client
    assert {"id": "rhai", "aliases": ["Rhai", "rhai"], "extensions": [".rhai"], "configuration": "./language-configuration.json"} in manifest["contributes"]["languages"]
    assert grammar["scopeName"] == "source.rhai"
    assert manifest["contributes"]["yamlValidation"] == [{"fileMatch": "config/*.yaml", "url": "./schemas/manifest.schema.json"}]
    # The language client goes with it: the extension runs without an npm install.
    assert "extension/node_modules/vscode-languageclient/package.json" in names


def test_the_extension_ships_the_manifest_schema_the_engine_writes():
    shipped = json.loads((REPO / "editors/vscode/schemas/manifest.schema.json").read_text())
    assert shipped == json.loads((REPO / "docs/manifest.schema.json").read_text())

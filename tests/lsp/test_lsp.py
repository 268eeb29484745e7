"""What a designer sees in an editor driving `ruleweave lsp`: problems as they type, completion,
hover and go-to-definition, on the shipped packs."""

import pytest
from lsprotocol import types

from conftest import change_doc, diagnostics, open_doc, text, uri

MERIT = "scripts/pirate/merit.rhai"


def at(body: str, needle: str, offset: int = 0) -> types.Position:
    """The position of `needle` (plus `offset` characters) in `body`."""
    index = body.index(needle) + offset
    line = body.count("\n", 0, index)
    column = index - (body.rfind("\n", 0, index) + 1)
    return types.Position(line=line, character=column)


def span(d: types.Diagnostic):
    return (d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character)


@pytest.mark.asyncio
async def test_typed_mistakes_show_at_their_words_and_clear_when_fixed(client):
    body = text(MERIT)
    typo = body.replace("let w = param(\"fallback_weights\");", "let w = parm(\"fallback_weights\");\n    let s = this.merit_scroe;")
    assert typo != body
    open_doc(client, MERIT, typo)
    found = await diagnostics(client, MERIT, lambda ds: len(ds) >= 2)
    by_message = {d.message: d for d in found}
    parm = next(d for m, d in by_message.items() if "`parm`" in m)
    assert "did you mean `param`?" in parm.message
    start = at(typo, "parm(")
    assert span(parm) == (start.line, start.character, start.line, start.character + 4)
    scroe = next(d for m, d in by_message.items() if "merit_scroe" in m)
    assert "did you mean `merit_score`?" in scroe.message
    start = at(typo, "merit_scroe")
    assert span(scroe) == (start.line, start.character, start.line, start.character + len("merit_scroe"))
    assert all(d.severity == types.DiagnosticSeverity.Error for d in found)

    # The first fixed, in the buffer: only the second is left.
    fixed = typo.replace("parm(", "param(")
    change_doc(client, MERIT, fixed, 2)
    left = await diagnostics(client, MERIT, lambda ds: len(ds) == 1)
    assert "merit_scroe" in left[0].message
    change_doc(client, MERIT, body, 3)
    assert await diagnostics(client, MERIT, lambda ds: ds == []) == []


@pytest.mark.asyncio
async def test_a_route_to_a_node_renamed_in_the_manifest_is_named_at_the_route(client):
    rel = "config/pirate.yaml"
    body = text(rel)
    renamed = body.replace("    handle_blocked:\n", "    handle_block:\n", 1)
    open_doc(client, rel, renamed, "yaml")
    found = await diagnostics(client, rel, lambda ds: any("handle_blocked" in d.message for d in ds))
    # Both places that still name it, each at the name.
    route = at(renamed, "to: handle_blocked", len("to: "))
    edge = at(renamed, "- handle_blocked -> END", 2)
    spans = {span(d) for d in found if "`handle_blocked`" in d.message}
    assert (route.line, route.character, route.line, route.character + 14) in spans
    assert (edge.line, edge.character, edge.line, edge.character + 14) in spans
    # Named back, both clear.
    change_doc(client, rel, body, 2)
    assert await diagnostics(client, rel, lambda ds: ds == []) == []


@pytest.mark.asyncio
async def test_completion_after_this_lists_the_packs_state_fields(client):
    body = text(MERIT)
    typing = body.replace("let w = param(\"fallback_weights\");", "let w = param(\"fallback_weights\");\n    let s = this.;")
    open_doc(client, MERIT, typing)
    pos = at(typing, "this.;", len("this."))
    result = await client.text_document_completion_async(
        types.CompletionParams(text_document=types.TextDocumentIdentifier(uri=uri(MERIT)), position=pos)
    )
    labels = {i.label for i in (result.items if hasattr(result, "items") else result)}
    assert {"merit_score", "conversation_history", "strategies_attempted", "is_won"} <= labels
    assert "param" not in labels


@pytest.mark.asyncio
async def test_completion_of_a_host_function_and_its_signature_on_hover(client):
    body = text(MERIT)
    open_doc(client, MERIT, body)
    pos = at(body, "param(\"fallback_weights\")", 2)
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri(MERIT)), position=pos)
    )
    assert hover is not None
    assert "param(name: string) -> value" in hover.contents.value
    result = await client.text_document_completion_async(
        types.CompletionParams(text_document=types.TextDocumentIdentifier(uri=uri(MERIT)), position=types.Position(line=pos.line, character=pos.character))
    )
    items = result.items if hasattr(result, "items") else result
    llm = next(i for i in items if i.label == "llm_json")
    assert llm.detail == "llm_json(profile: string, prompt: string) -> value"


@pytest.mark.asyncio
async def test_definition_of_a_route_target_lands_on_the_node(client):
    rel = "config/pirate.yaml"
    body = text(rel)
    open_doc(client, rel, body, "yaml")
    pos = at(body, "to: handle_blocked", len("to: ") + 3)
    result = await client.text_document_definition_async(
        types.DefinitionParams(text_document=types.TextDocumentIdentifier(uri=uri(rel)), position=pos)
    )
    location = result[0] if isinstance(result, list) else result
    node = at(body, "    handle_blocked:\n", 4)
    assert location.uri == uri(rel)
    assert (location.range.start.line, location.range.start.character) == (node.line, node.character)
    assert location.range.end.character == node.character + len("handle_blocked")


@pytest.mark.asyncio
@pytest.mark.parametrize("pack", ["pirate", "interview", "party", "designer", "debate"])
async def test_every_shipped_pack_opens_clean(client, pack):
    rel = f"config/{pack}.yaml"
    open_doc(client, rel, text(rel), "yaml")
    assert await diagnostics(client, rel, lambda ds: True) == []


def apply(body: str, edits) -> str:
    """`edits` applied to `body` (last first, so earlier positions hold)."""
    lines = body.split("\n")
    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        assert e.range.start.line == e.range.end.line
        l = lines[e.range.start.line]
        lines[e.range.start.line] = l[: e.range.start.character] + e.new_text + l[e.range.end.character :]
    return "\n".join(lines)


@pytest.mark.asyncio
async def test_renaming_a_node_changes_its_key_edges_and_routes_and_refuses_a_taken_name(client):
    rel = "config/pirate.yaml"
    body = text(rel)
    open_doc(client, rel, body, "yaml")
    key = at(body, "    handle_blocked:\n", 6)
    doc = types.TextDocumentIdentifier(uri=uri(rel))
    refs = await client.text_document_references_async(
        types.ReferenceParams(text_document=doc, position=key, context=types.ReferenceContext(include_declaration=True))
    )
    lines = sorted(r.range.start.line for r in refs)
    assert lines == sorted([key.line, at(body, "- handle_blocked -> END").line, at(body, "to: handle_blocked").line])

    edit = await client.text_document_rename_async(types.RenameParams(text_document=doc, position=key, new_name="handle_caught"))
    renamed = apply(body, edit.changes[uri(rel)])
    assert "    handle_caught:\n" in renamed
    assert "- handle_caught -> END" in renamed
    assert "to: handle_caught" in renamed
    # The script function of the same name is another thing: it stays.
    assert "script: validate.rhai::handle_blocked" in renamed
    change_doc(client, rel, renamed, 2)
    assert await diagnostics(client, rel, lambda ds: ds == []) == []

    with pytest.raises(Exception, match="already has a node `intake`"):
        await client.text_document_rename_async(types.RenameParams(text_document=doc, position=key, new_name="intake"))


@pytest.mark.asyncio
async def test_a_lens_over_each_node_counts_the_test_cases_that_run_it(client):
    rel = "config/pirate.yaml"
    body = text(rel)
    open_doc(client, rel, body, "yaml")
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri(rel))))
    by_line = {l.range.start.line: l.command.title for l in lenses}
    # Both pirate cases play a whole turn; neither has the captain caught saying the phrase early.
    assert by_line[at(body, "    intake:\n").line] == "2 test cases run this node"
    assert by_line[at(body, "    validate_response:\n").line] == "2 test cases run this node"
    assert by_line[at(body, "    handle_blocked:\n").line] == "no test case runs this node"
    assert len(lenses) == 5


async def rename_everywhere(client, rel: str, needle: str, offset: int, new_name: str) -> dict:
    """Renames what is at `needle` (+offset) in `rel`; opens every file the edit changes with its
    new text; the new texts by file."""
    body = text(rel)
    open_doc(client, rel, body, "yaml" if rel.endswith(".yaml") else "rhai")
    edit = await client.text_document_rename_async(
        types.RenameParams(text_document=types.TextDocumentIdentifier(uri=uri(rel)), position=at(body, needle, offset), new_name=new_name)
    )
    changed = {}
    root = uri("")
    for file_uri, edits in edit.changes.items():
        file = file_uri[len(root):].lstrip("/")
        changed[file] = apply(text(file), edits)
    for file, new in changed.items():
        if file == rel:
            change_doc(client, file, new, 2)
        else:
            open_doc(client, file, new, "x")
    return changed


@pytest.mark.asyncio
async def test_renaming_a_state_field_changes_every_use_and_the_pack_still_checks(client):
    changed = await rename_everywhere(client, "config/pirate.yaml", "  merit_score: {type: int", 2, "merit_points")
    manifest = changed["config/pirate.yaml"]
    assert "  merit_points: {type: int" in manifest
    assert "track: [merit_points]" in manifest
    assert "{{ merit_points }}" in manifest
    assert "doc: merit_score >= the difficulty's threshold." in manifest  # prose is left alone
    assert any("this.merit_points" in t or "merit_points:" in t for f, t in changed.items() if f.endswith(".rhai"))
    for file in changed:
        assert await diagnostics(client, file, lambda ds: ds == []) == [], file


@pytest.mark.asyncio
async def test_renaming_a_param_changes_its_reads_and_bounds_and_the_pack_still_checks(client):
    changed = await rename_everywhere(client, "config/pirate.yaml", "  thresholds: {easy", 2, "bars")
    manifest = changed["config/pirate.yaml"]
    assert "  bars: {easy: 40" in manifest
    assert "  bars.medium: {min: 0, max: 100}" in manifest
    assert "params.bars[difficulty]" in manifest
    for file in changed:
        assert await diagnostics(client, file, lambda ds: ds == []) == [], file


@pytest.mark.asyncio
async def test_renaming_a_script_function_changes_the_manifest_that_names_it(client):
    changed = await rename_everywhere(client, MERIT, "fn from_judge(", 3, "from_the_judge")
    assert "fn from_the_judge(reply)" in changed[MERIT]
    assert "then: merit.rhai::from_the_judge" in changed["config/pirate.yaml"]
    for file in changed:
        assert await diagnostics(client, file, lambda ds: ds == []) == [], file


async def labels_at(client, rel: str, body: str, pos) -> set:
    result = await client.text_document_completion_async(
        types.CompletionParams(text_document=types.TextDocumentIdentifier(uri=uri(rel)), position=pos)
    )
    return {i.label for i in (result.items if hasattr(result, "items") else result)}


@pytest.mark.asyncio
async def test_the_manifest_completes_its_keys_node_names_scripts_and_reducers(client):
    rel = "config/pirate.yaml"
    body = text(rel)
    typing = body.replace("    handle_blocked:\n", "    handle_blocked:\n      \n", 1)
    typing = typing.replace("    - handle_blocked -> END\n", "    - handle_blocked -> END\n    - intake -> \n", 1)
    typing = typing.replace("      script: validate.rhai::handle_blocked\n", "      script: validate.rhai::handle_blocked\n      then: \n", 1)
    open_doc(client, rel, typing, "yaml")
    # A node's own keys, from the manifest's JSON Schema.
    keys = await labels_at(client, rel, typing, at(typing, "    handle_blocked:\n      \n", len("    handle_blocked:\n      ")))
    assert {"script", "llm", "prompt", "fallback", "doc"} <= keys, keys
    # Node names after an edge's arrow.
    nodes = await labels_at(client, rel, typing, at(typing, "    - intake -> \n", len("    - intake -> ")))
    assert {"merit_check", "generate_response", "validate_response", "handle_blocked", "END"} <= nodes
    # Script functions where a node names one.
    functions = await labels_at(client, rel, typing, at(typing, "      then: \n", len("      then: ")))
    assert {"merit.rhai::from_judge", "validate.rhai::spoken", "intake.rhai::intake"} <= functions


@pytest.mark.asyncio
async def test_a_template_completes_fields_and_filters(client):
    rel = "prompts/pirate/judge.j2"
    body = text(rel) + "\n{{ strategies_attempted | jo"
    open_doc(client, rel, body, "jinja")
    lines = body.split("\n")
    end = types.Position(line=len(lines) - 1, character=len(lines[-1]))
    filters = await labels_at(client, rel, body, end)
    assert {"join", "length", "transcript"} <= filters
    fields = await labels_at(client, rel, body, types.Position(line=len(lines) - 1, character=len("{{ strat")))
    assert {"strategies_attempted", "merit_score", "params"} <= fields


@pytest.mark.asyncio
async def test_renaming_a_node_leaves_the_profile_and_strings_of_the_same_name(client):
    # The debate's `judge` is a node, a model profile (`llm: judge`) and the stand-in's profile
    # name: only the node is renamed.
    rel = "config/debate.yaml"
    changed = await rename_everywhere(client, rel, "\n    judge:\n      script: factcheck", 5, "referee")
    manifest = changed[rel]
    assert "\n    referee:\n      script: factcheck.rhai::judge" in manifest, "the function keeps its name"
    assert "      llm: judge\n" in manifest and "\n  judge:\n" in manifest, "the profile keeps its name"
    assert "scripts/debate/standin.rhai" not in changed
    for file in changed:
        assert await diagnostics(client, file, lambda ds: ds == []) == [], file
    # From the profile's place, there is nothing to rename: it is not the node.
    body = manifest
    edit = await client.text_document_rename_async(
        types.RenameParams(text_document=types.TextDocumentIdentifier(uri=uri(rel)), position=at(body, "llm: judge", 6), new_name="x")
    )
    assert edit is None


@pytest.mark.asyncio
async def test_renaming_a_field_that_shares_a_nodes_name_leaves_the_graph(client):
    # The designer's `design` is a state field, a node, an input field and a schema.
    rel = "config/designer.yaml"
    changed = await rename_everywhere(client, rel, "  design: {type: any, doc", 2, "gdd")
    manifest = changed[rel]
    assert "  gdd: {type: any, doc" in manifest
    assert "- analyze, retrieve -> design" in manifest and "- design -> build" in manifest
    assert "  design: {type: any, default: null" in manifest, "the input field keeps its name"
    for file in changed:
        assert await diagnostics(client, file, lambda ds: ds == []) == [], file

"""A client generated from docs/openapi.json (by openapi-python-client) plays the pirate.

Usage: client.py GENERATED_DIR SERVER_URL. The test generates the client into GENERATED_DIR and
starts the server; this script only uses what the generator made from the document.
"""

import sys

sys.path.insert(0, sys.argv[1])

from ruleweave_client import Client  # noqa: E402
from ruleweave_client.api.sessions import (  # noqa: E402
    create_session,
    delete_session,
    fork_session,
    get_session,
    list_checkpoints,
    play_turn,
)
from ruleweave_client.models import ErrorBody, NewFork, NewSession, NewTurn  # noqa: E402
from ruleweave_client.models.new_session_options import NewSessionOptions  # noqa: E402

client = Client(base_url=sys.argv[2], raise_on_unexpected_status=True)

options = NewSessionOptions.from_dict({"difficulty": "easy"})
opened = create_session.sync(client=client, body=NewSession(pack="pirate", options=options))
assert opened.pack == "pirate", opened

turn = play_turn.sync(opened.id, client=client, body=NewTurn(input_="Ahoy, captain! I sailed with your crew."))
reply = turn.output.additional_properties["pirate_response"]
assert turn.turn == 1 and reply, turn

session = get_session.sync(opened.id, client=client)
assert session.turns == 1 and not session.finished, session

checkpoints = list_checkpoints.sync(opened.id, client=client)
assert [c.seq for c in checkpoints.checkpoints] == [0, 1], checkpoints

fork = fork_session.sync(opened.id, client=client, body=NewFork(checkpoint=0))
assert fork.forked_from.id == opened.id and fork.forked_from.checkpoint == 0, fork

missing = get_session.sync("no-such-session", client=client)
assert isinstance(missing, ErrorBody) and missing.error.code == "not_found", missing

delete_session.sync_detailed(fork.id, client=client)
print(f"the generated client played a turn: {reply!r}")

"""Plays the pirate through ruleweave's chat face with the official OpenAI Python SDK.

Usage: sdk_client.py BASE_URL (a running `ruleweave serve`). Exits non-zero on the first surprise.
"""

import sys

import openai

client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="not-needed-on-localhost", max_retries=0)

ids = [m.id for m in client.models.list()]
assert "pirate" in ids and "pirate:hard" in ids, ids


def session_of(completion):
    return completion.model_extra["ruleweave"]["session"], completion.model_extra["ruleweave"]["turn"]


history = [{"role": "user", "content": "Ahoy captain! I bring word from your mother."}]
first = client.chat.completions.create(model="pirate", messages=history)
session, turn = session_of(first)
assert turn == 1, first
history += [
    {"role": "assistant", "content": first.choices[0].message.content},
    {"role": "user", "content": "She says you promised me a share of the treasure."},
]
second = client.chat.completions.create(model="pirate", messages=history)
assert session_of(second) == (session, 2), (session, second)
assert second.usage.total_tokens == second.usage.prompt_tokens + second.usage.completion_tokens

history += [
    {"role": "assistant", "content": second.choices[0].message.content},
    {"role": "user", "content": "I can sing the song she sang to you."},
]
text, usage = "", None
for chunk in client.chat.completions.create(
    model="pirate", messages=history, stream=True, stream_options={"include_usage": True}
):
    if chunk.choices:
        text += chunk.choices[0].delta.content or ""
    if chunk.usage:
        usage = chunk.usage
assert text.strip(), "the stream said nothing"
assert usage is not None and usage.total_tokens > 0, usage

history += [{"role": "assistant", "content": text}, {"role": "user", "content": "Well, captain?"}]
fourth = client.chat.completions.create(model="pirate", messages=history)
assert session_of(fourth) == (session, 4), (session, fourth)

try:
    client.chat.completions.create(model="no-such-pack", messages=[{"role": "user", "content": "hi"}])
    raise AssertionError("an unknown pack was played")
except openai.NotFoundError as e:
    assert "no-such-pack" in str(e), e

# The party, one person typing for the table: its opening asks the first question and says what
# to type; a line the pack refuses is answered in the pack's words (what was wrong, what to type),
# and the game goes on in the same session.
party = [{"role": "user", "content": "Let's play!"}]
opening = client.chat.completions.create(model="party", messages=party)
party_session, party_turn = session_of(opening)
said = opening.choices[0].message.content
assert "(type: 4/6, all, none, names of those who have" in said, said
party += [{"role": "assistant", "content": said}, {"role": "user", "content": "4/6"}]
round_two = client.chat.completions.create(model="party", messages=party)
assert session_of(round_two) == (party_session, party_turn + 1), (party_session, round_two)
party += [{"role": "assistant", "content": round_two.choices[0].message.content}, {"role": "user", "content": "yes"}]
refused = client.chat.completions.create(model="party", messages=party)
words = refused.choices[0].message.content
assert "yes is not a player" in words and "(type: 4/6, all, none" in words, words
assert ".rhai" not in words and "failed" not in words, words
assert session_of(refused) == (party_session, party_turn + 1), ("no turn was played", refused)
party += [{"role": "assistant", "content": words}, {"role": "user", "content": "all"}]
round_three = client.chat.completions.create(model="party", messages=party)
assert session_of(round_three) == (party_session, party_turn + 2), (party_session, round_three)

print("the SDK played 4 turns in one session, and a party round with a refused line")

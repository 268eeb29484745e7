#!/usr/bin/env python3
"""Plays a fixed number of pirate conversations against `ruleweave serve`, one after another on
one keep-alive connection: the same requests in the same order on every run and every build, so
what the server does for them can be counted (bench/server_instructions.sh).

    bench/server_turns.py URL CONVERSATIONS

Each conversation opens a session (difficulty hard, as the load generator plays) and plays 20
turns of the LangGraph baseline's messages (tests/data/pirate_messages.txt), or fewer when the
game is won; prints the number of turns played. Standard library only.
"""
import http.client
import json
import os
import sys
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
MESSAGES = open(os.path.join(HERE, "..", "tests", "data", "pirate_messages.txt")).read().splitlines()


def main() -> None:
    url, conversations = urllib.parse.urlparse(sys.argv[1]), int(sys.argv[2])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
    headers = {"Content-Type": "application/json"}
    if os.environ.get("RULEWEAVE_TOKEN"):
        headers["Authorization"] = "Bearer " + os.environ["RULEWEAVE_TOKEN"]

    def post(path: str, body: dict) -> dict:
        conn.request("POST", path, json.dumps(body), headers)
        r = conn.getresponse()
        answer = json.loads(r.read())
        if r.status >= 300 and answer.get("error", {}).get("code") != "session_finished":
            raise SystemExit(f"POST {path}: {r.status} {answer}")
        return answer

    turns = 0
    for _ in range(conversations):
        session = post("/v1/sessions", {"pack": "pirate", "options": {"difficulty": "hard"}})["id"]
        for t in range(20):
            played = post(f"/v1/sessions/{session}/turns", {"input": {"message": MESSAGES[t % len(MESSAGES)]}})
            if "error" in played:
                break  # won on the turn before: the next conversation starts
            turns += 1
            if played.get("finished"):
                break
    print(turns)


if __name__ == "__main__":
    main()

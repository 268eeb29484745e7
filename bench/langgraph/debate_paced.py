"""The debate of ruleweave's `debate` pack as a LangGraph graph, on a latency-shaped fake model.

The same debate as `engine/benches/latency.rs` plays on ruleweave ("debate, canned answers"): per
round a moderator (no call), then each side speaks (the debater model), its claims are extracted
(the claims model) and each claim is searched and judged (a search, then the evidence model) --
in LangGraph with a `Send` fan-out, so the claims of a speech are checked concurrently, as the
pack's `map:` node checks them. A speech with a false claim goes back to its speaker, at most 3
times (strict mode). After the rounds the judge model decides.

The fake model answers what ruleweave's bench answers: a speech with two claims, those two claims,
and a verdict that is false for every third check. Every model call takes `--ttft` seconds and
then `--tokens` tokens at `--rate` tokens a second; a search takes `--search` seconds
(`asyncio.sleep`, no jitter, so both engines wait exactly as long). MemorySaver, as ruleweave
keeps the debate in memory.

Usage: python debate_paced.py --debates 2 --rounds 3 [--ttft 0.3 --rate 100 --tokens 40 --search 0.5]
Prints one JSON line: wall time per debate, the calls made, the critical path (the longest chain
of calls that depend on each other) and wall / critical path.
"""
import asyncio
import json
import operator
import sys
from typing import Annotated, TypedDict

from common import arg, emit, perf

TTFT = arg("ttft", 0.3, float)
RATE = arg("rate", 100.0, float)
TOKENS = arg("tokens", 40, int)
SEARCH = arg("search", 0.5, float)
MAX_RETRIES = 3

SPEECH = (
    "PHASE 1 - REFLECTION:\nThe other side's numbers.\n\nPHASE 2 - CRITIQUE:\nThey ignore wages.\n\n"
    "PHASE 3 - REFINEMENT:\nProductivity rose by 14 percent in support teams. Wages followed within two years."
)
CLAIMS = '{"claims": ["Productivity rose by 14 percent in support teams", "Wages followed within two years"]}'


class Fake:
    """The canned models and search engine, each call paced; counts calls and checks."""

    def __init__(self):
        self.checks = 0
        self.calls = 0

    async def complete(self, profile):
        self.calls += 1
        await asyncio.sleep(TTFT + TOKENS / RATE)
        if profile == "debater":
            return SPEECH
        if profile == "claims":
            return CLAIMS
        if profile == "judge":
            return '{"winner": "pro", "reasoning": "Better sourced."}'
        self.checks += 1
        verdict = "false" if self.checks % 3 == 0 else "true"
        return json.dumps({"verdict": verdict, "reasoning": "As the sources say."})

    async def search(self, query):
        self.calls += 1
        await asyncio.sleep(SEARCH)
        return [{"title": f"Source {i}", "url": f"https://example.org/{i}", "content": f"About {query}."} for i in (1, 2, 3)]


MODEL = Fake()


class Debate(TypedDict):
    round: int
    rounds: int
    speaker: int
    retry: int
    attempt: int
    draft: str
    claims: list
    reject: bool
    sent_back: int
    checks: Annotated[list, operator.add]
    transcript: Annotated[list, operator.add]
    winner: str


async def moderator(s):
    return {"speaker": 0, "retry": 0}


async def speak(s):
    return {"draft": await MODEL.complete("debater"), "attempt": s["attempt"] + 1}


async def extract(s):
    return {"claims": json.loads(await MODEL.complete("claims"))["claims"]}


def to_verify(s):
    from langgraph.types import Send

    return [Send("verify", {"claim": c, "attempt": s["attempt"]}) for c in s["claims"]]


async def verify(item):
    found = await MODEL.search(item["claim"])
    answer = json.loads(await MODEL.complete("evidence"))
    return {"checks": [{"attempt": item["attempt"], "verdict": answer["verdict"], "sources": len(found)}]}


async def judge(s):
    false = [c for c in s["checks"] if c["attempt"] == s["attempt"] and c["verdict"] == "false"]
    if false and s["retry"] < MAX_RETRIES:
        return {"reject": True, "retry": s["retry"] + 1, "sent_back": s["sent_back"] + 1}
    return {"reject": False, "retry": 0, "speaker": s["speaker"] + 1, "transcript": [s["draft"]]}


def after_judge(s):
    return "speak" if s["reject"] or s["speaker"] < 2 else "round_transition"


async def round_transition(s):
    return {"round": s["round"] + 1}


def after_round(s):
    return "moderator" if s["round"] < s["rounds"] else "decide"


async def decide(s):
    return {"winner": json.loads(await MODEL.complete("judge"))["winner"]}


def build():
    from langgraph.checkpoint.memory import MemorySaver
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(Debate)
    for name, fn in [("moderator", moderator), ("speak", speak), ("extract", extract), ("verify", verify),
                     ("judge", judge), ("round_transition", round_transition), ("decide", decide)]:
        g.add_node(name, fn)
    g.add_edge(START, "moderator")
    g.add_edge("moderator", "speak")
    g.add_edge("speak", "extract")
    g.add_conditional_edges("extract", to_verify, ["verify"])
    g.add_edge("verify", "judge")
    g.add_conditional_edges("judge", after_judge, ["speak", "round_transition"])
    g.add_conditional_edges("round_transition", after_round, ["moderator", "decide"])
    g.add_edge("decide", END)
    return g.compile(checkpointer=MemorySaver())


async def main():
    debates = arg("debates", 2, int)
    rounds = arg("rounds", 3, int)
    graph = build()
    walls, critical = [], []
    for i in range(debates):
        MODEL.checks = 0
        MODEL.calls = 0
        start = {"round": 0, "rounds": rounds, "speaker": 0, "retry": 0, "attempt": 0, "draft": "", "claims": [],
                 "reject": False, "sent_back": 0, "checks": [], "transcript": [], "winner": ""}
        t0 = perf()
        out = await graph.ainvoke(start, {"recursion_limit": 400, "configurable": {"thread_id": f"debate-{i}"}})
        walls.append(perf() - t0)
        # Every speech is a chain: speech, claims, then its claims' checks side by side (a
        # search and a verdict each); the judge's decision ends the debate.
        call = TTFT + TOKENS / RATE
        critical.append(out["attempt"] * (call + call + SEARCH + call) + call)
        calls = MODEL.calls
    wall = sum(walls) / len(walls)
    path = sum(critical) / len(critical)
    emit({"bench": "debate_paced", "debates": debates, "rounds": rounds, "speeches": out["attempt"],
          "sent_back": out["sent_back"], "calls": calls, "winner": out["winner"], "wall_ms": round(wall * 1000, 1),
          "critical_ms": round(path * 1000, 1), "ratio": round(wall / path, 4),
          "pace": {"ttft_s": TTFT, "rate": RATE, "tokens": TOKENS, "search_s": SEARCH},
          "features": "async nodes, Send fan-out for the claims' checks, MemorySaver"})


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

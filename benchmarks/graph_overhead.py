"""Graph overhead per chunk: MemAgent (LangGraph) vs a plain Python loop calling the same fake model.

Both do the same work per chunk (decode the chunk, render the prompt, call the model, enforce the budget, trace
the memory to the chunk); the difference is what the graph adds (`ainvoke` also hands the tokenizer work to a
thread, before and after each model call). Also measured: a SQLite file checkpointer
(`open_checkpoint_db`) with durability="sync", with and without a disk flush per step, and the file's size per
chunk. Each variant runs ``--rounds`` times, interleaved with the others; the fastest round counts (these
machines are noisy: the minimum is the run least disturbed).

    python benchmarks/graph_overhead.py [--chunks 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from common import benchmark_tokenizer, haystack_text, save
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.checkpoints import open_checkpoint_db
from memagent_graph.nodes import enforce_memory_budget, extract_answer
from memagent_graph.nodes.provenance import ReadChunk, trace_memory
from memagent_graph.testing import RuleMemoryModel

CONFIG = MemAgentConfig(chunk_tokens=1000, memory_tokens=256, temperature=0.0)


class Reading:
    """The work a read does per chunk, without a graph: decode, prompt, call, budget, trace."""

    def __init__(self, model: RuleMemoryModel, agent: MemAgent, question: str, document: TextDocument) -> None:
        self.chunked, self.tokenizer, self.question = agent.chunk(document), agent.tokenizer, question
        self.bound = model.bind(max_tokens=CONFIG.memory_tokens, temperature=0.0, top_p=CONFIG.top_p)

    def update(self, index: int, memory: str, evidence: list) -> tuple[str, list]:
        text = self.chunked.chunk_text(index)
        prompt = CONFIG.prompts.render_update(question=self.question, memory=memory, section=text)
        reply = self.bound.invoke([HumanMessage(prompt)]).text
        memory = enforce_memory_budget(reply, previous=memory, tokenizer=self.tokenizer, budget=256).text
        chunk = ReadChunk(self.chunked.doc_id, index, text, self.chunked.chunk_origin(index), None)
        return memory, trace_memory(memory, chunk=chunk, previous=evidence, min_score=CONFIG.evidence_min_score)

    def answer(self, memory: str) -> str:
        prompt = CONFIG.prompts.render_answer(question=self.question, memory=memory)
        return extract_answer(self.bound.invoke([HumanMessage(prompt)]).text)[0]


def plain_loop(reading: Reading) -> str:
    memory, evidence = "", []
    for index in range(reading.chunked.num_chunks):
        memory, evidence = reading.update(index, memory, evidence)
    return reading.answer(memory)


class _BareState(TypedDict):
    cursor: int
    memory: str
    evidence: list


def bare_graph(reading: Reading, checkpointer: SqliteSaver | None = None) -> CompiledStateGraph:
    """The same per-chunk work as one LangGraph node looping on itself: what LangGraph alone costs per step."""

    def update(state: _BareState) -> dict:
        memory, evidence = reading.update(state["cursor"], state["memory"], state["evidence"])
        return {"cursor": state["cursor"] + 1, "memory": memory, "evidence": evidence}

    def more(state: _BareState) -> str:
        return "update" if state["cursor"] < reading.chunked.num_chunks else END

    builder = StateGraph(_BareState)
    builder.add_node("update", update)
    builder.add_edge(START, "update")
    builder.add_conditional_edges("update", more, ["update", END])
    return builder.compile(checkpointer=checkpointer)


def run_bare(reading: Reading, checkpointer: SqliteSaver | None = None) -> str:
    config = {"recursion_limit": reading.chunked.num_chunks + 5, "configurable": {"thread_id": "bare"}}
    state = bare_graph(reading, checkpointer).invoke({"cursor": 0, "memory": "", "evidence": []}, config)
    return reading.answer(state["memory"])


def timed(run) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tokenizer = benchmark_tokenizer()
    document = TextDocument(haystack_text(args.chunks * CONFIG.chunk_tokens, tokenizer))
    question = "What is the special magic number?"
    model = RuleMemoryModel(pad_words=100, report_usage=True)
    agent = MemAgent(model, config=CONFIG, tokenizer=tokenizer)
    reading = Reading(model, agent, question, document)
    chunks = reading.chunked.num_chunks
    plain_loop(reading)  # warm caches

    def _memagent(saver: SqliteSaver) -> MemAgent:
        return MemAgent(model, config=CONFIG, tokenizer=tokenizer, checkpointer=saver)

    with tempfile.TemporaryDirectory() as folder:

        def checkpointed(run, name: str, fsync: bool = False):
            return lambda: _with_checkpoint_file(Path(folder) / f"{name}.db", fsync, run)

        variants = {
            "plain loop": lambda: plain_loop(reading),
            "bare LangGraph loop (1 node)": lambda: run_bare(reading),
            "MemAgent.invoke": lambda: agent.invoke(question, document),
            "MemAgent.ainvoke": lambda: asyncio.run(agent.ainvoke(question, document)),
            "bare LangGraph loop + SQLite": checkpointed(lambda saver: run_bare(reading, saver), "bare"),
            "MemAgent.invoke + SQLite": checkpointed(lambda saver: _memagent(saver).invoke(question, document), "ma"),
            "MemAgent.invoke + SQLite, fsync": checkpointed(
                lambda saver: _memagent(saver).invoke(question, document), "fsync", fsync=True
            ),
        }
        rounds = [{name: timed(run) for name, run in variants.items()} for _ in range(args.rounds)]
        rows = {name: min(times[name] for times in rounds) for name in variants}
        db_mb = {name: (Path(folder) / f"{name}.db").stat().st_size / 1e6 for name in ("bare", "ma")}
    base = rows["plain loop"]
    result = {
        "chunks": chunks,
        "rounds": args.rounds,
        "per_chunk_ms": {name: round(1000 * s / chunks, 3) for name, s in rows.items()},
        "overhead_vs_plain_ms": {name: round(1000 * (s - base) / chunks, 3) for name, s in rows.items()},
        "sqlite_db_mb": round(db_mb["ma"], 2),
        "sqlite_kb_per_chunk": round(1000 * db_mb["ma"] / chunks, 1),
        "bare_sqlite_kb_per_chunk": round(1000 * db_mb["bare"] / chunks, 1),
    }
    print(f"{chunks} chunks of {CONFIG.chunk_tokens} tokens, fake model (no latency), best of {args.rounds} rounds")
    for name, seconds in rows.items():
        print(f"  {name:34s} {1000 * seconds / chunks:7.3f} ms/chunk  (+{1000 * (seconds - base) / chunks:.3f})")
    print(
        f"  SQLite file: {result['sqlite_kb_per_chunk']} KB per chunk "
        f"(bare LangGraph loop: {result['bare_sqlite_kb_per_chunk']} KB)"
    )
    print(f"saved {save('graph_overhead', result)}")


def _with_checkpoint_file(db: Path, fsync: bool, run) -> None:
    """``run(saver)`` on a fresh SQLite checkpoint file (removed first: every round writes the same amount)."""
    for stale in db.parent.glob(f"{db.name}*"):
        stale.unlink()
    with open_checkpoint_db(db, fsync=fsync) as saver:
        run(saver)


if __name__ == "__main__":
    main()

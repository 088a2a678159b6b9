"""Graph overhead per chunk: MemAgent (LangGraph) vs a plain Python loop calling the same fake model.

Both do the same work per chunk (decode the chunk, render the prompt, call the model, enforce the budget, trace
the memory to the chunk); the difference is what the graph adds. Also measured: a SQLite file checkpointer
(`open_checkpoint_db`) with durability="sync", with and without a disk flush per step, and the file's size per
chunk. Each variant runs ``--rounds`` times, interleaved with the others; the fastest round counts (these
machines are noisy: the minimum is the run least disturbed).

    python benchmarks/graph_overhead.py [--chunks 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import benchmark_tokenizer, haystack_text, save
from langchain_core.messages import HumanMessage

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.checkpoints import open_checkpoint_db
from memagent_graph.nodes import enforce_memory_budget, extract_answer
from memagent_graph.nodes.provenance import ReadChunk, trace_memory
from memagent_graph.testing import RuleMemoryModel

CONFIG = MemAgentConfig(chunk_tokens=1000, memory_tokens=256, temperature=0.0)


def plain_loop(model: RuleMemoryModel, agent: MemAgent, question: str, document: TextDocument) -> str:
    chunked = agent.chunk(document)
    memory, evidence = "", []
    bound = model.bind(max_tokens=CONFIG.memory_tokens, temperature=0.0, top_p=CONFIG.top_p)
    for index in range(chunked.num_chunks):
        text = chunked.chunk_text(index)
        prompt = CONFIG.prompts.render_update(question=question, memory=memory, section=text)
        reply = bound.invoke([HumanMessage(prompt)]).text
        memory = enforce_memory_budget(reply, previous=memory, tokenizer=agent.tokenizer, budget=256).text
        chunk = ReadChunk(chunked.doc_id, index, text, chunked.chunk_origin(index), None)
        evidence = trace_memory(memory, chunk=chunk, previous=evidence, min_score=CONFIG.evidence_min_score)
    answer = bound.invoke([HumanMessage(CONFIG.prompts.render_answer(question=question, memory=memory))]).text
    return extract_answer(answer)[0]


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
    chunks = agent.chunk(document).num_chunks
    plain_loop(model, agent, question, document)  # warm caches
    with tempfile.TemporaryDirectory() as folder:
        variants = {
            "plain loop": lambda: plain_loop(model, agent, question, document),
            "MemAgent.invoke (no checkpointer)": lambda: agent.invoke(question, document),
            "MemAgent.invoke (SQLite file, sync, no fsync)": lambda: _checkpointed(
                model, tokenizer, folder, False, question, document
            ),
            "MemAgent.invoke (SQLite file, sync, fsync)": lambda: _checkpointed(
                model, tokenizer, folder, True, question, document
            ),
        }
        rounds = [{name: timed(run) for name, run in variants.items()} for _ in range(args.rounds)]
        rows = {name: min(times[name] for times in rounds) for name in variants}
        db_mb = (Path(folder) / "checkpoints-False.db").stat().st_size / 1e6
    base = rows["plain loop"]
    result = {
        "chunks": chunks,
        "rounds": args.rounds,
        "per_chunk_ms": {name: round(1000 * s / chunks, 3) for name, s in rows.items()},
        "overhead_vs_plain_ms": {name: round(1000 * (s - base) / chunks, 3) for name, s in rows.items()},
        "sqlite_db_mb": round(db_mb, 2),
        "sqlite_kb_per_chunk": round(1000 * db_mb / chunks, 1),
    }
    print(f"{chunks} chunks of {CONFIG.chunk_tokens} tokens, fake model (no latency), best of {args.rounds} rounds")
    for name, seconds in rows.items():
        print(f"  {name:46s} {1000 * seconds / chunks:7.3f} ms/chunk  (+{1000 * (seconds - base) / chunks:.3f})")
    print(f"  SQLite checkpoint file: {db_mb:.2f} MB ({result['sqlite_kb_per_chunk']} KB per chunk)")
    print(f"saved {save('graph_overhead', result)}")


def _checkpointed(model: RuleMemoryModel, tokenizer, folder: str, fsync: bool, question: str, document) -> None:
    """One read with a fresh SQLite checkpoint file (removed first: every round writes the same amount)."""
    db = Path(folder) / f"checkpoints-{fsync}.db"
    for stale in db.parent.glob(f"{db.name}*"):
        stale.unlink()
    with open_checkpoint_db(db, fsync=fsync) as saver:
        MemAgent(model, config=CONFIG, tokenizer=tokenizer, checkpointer=saver).invoke(question, document)


if __name__ == "__main__":
    main()

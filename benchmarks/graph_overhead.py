"""Graph overhead per chunk: MemAgent (LangGraph) vs a plain Python loop calling the same fake model.

Both do the same work per chunk (decode the chunk, render the prompt, call the model, enforce the budget, trace
the memory to the chunk); the difference is what the graph adds. Also measured: a SQLite file checkpointer
(`open_checkpoint_db`) with durability="sync", with and without a disk flush per step.

    python benchmarks/graph_overhead.py [--chunks 500]
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
    args = parser.parse_args()
    tokenizer = benchmark_tokenizer()
    document = TextDocument(haystack_text(args.chunks * CONFIG.chunk_tokens, tokenizer))
    question = "What is the special magic number?"
    model = RuleMemoryModel(pad_words=100, report_usage=True)
    agent = MemAgent(model, config=CONFIG, tokenizer=tokenizer)
    chunks = agent.chunk(document).num_chunks
    plain_loop(model, agent, question, document)  # warm caches
    rows = {
        "plain loop": timed(lambda: plain_loop(model, agent, question, document)),
        "MemAgent.invoke (no checkpointer)": timed(lambda: agent.invoke(question, document)),
    }
    with tempfile.TemporaryDirectory() as folder:
        for fsync in (False, True):
            db = Path(folder) / f"checkpoints-{fsync}.db"
            with open_checkpoint_db(db, fsync=fsync) as saver:
                saved = MemAgent(model, config=CONFIG, tokenizer=tokenizer, checkpointer=saver)
                name = f"MemAgent.invoke (SQLite file, sync, {'fsync' if fsync else 'no fsync'})"
                rows[name] = timed(lambda agent=saved: agent.invoke(question, document))
            db_mb = db.stat().st_size / 1e6
    base = rows["plain loop"]
    result = {
        "chunks": chunks,
        "per_chunk_ms": {name: round(1000 * s / chunks, 3) for name, s in rows.items()},
        "overhead_vs_plain_ms": {name: round(1000 * (s - base) / chunks, 3) for name, s in rows.items()},
        "sqlite_db_mb": round(db_mb, 2),
    }
    print(f"{chunks} chunks of {CONFIG.chunk_tokens} tokens, fake model (no latency)")
    for name, seconds in rows.items():
        print(f"  {name:42s} {1000 * seconds / chunks:7.3f} ms/chunk  (+{1000 * (seconds - base) / chunks:.3f})")
    print(f"  SQLite checkpoint file: {db_mb:.2f} MB")
    print(f"saved {save('graph_overhead', result)}")


if __name__ == "__main__":
    main()

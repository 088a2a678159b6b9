"""What tracing the memory to the document costs (`nodes/provenance.py`, run after every memory update).

1. A 5,000-token chunk (MemAgent's size) and memories of 256 and 1,024 tokens, half of their sentences copied
   from the chunk and half found nowhere (the slow path: unsupported sentences are also tried clause by clause).
2. The embedded engine's own reads (its defaults: 2,048-token chunks, 256-token quote memory) of needle
   documents: each memory update's model time against tracing that update's memory on its chunk.

    python benchmarks/evidence_alignment.py [--repeats 20] [--documents 2]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from common import benchmark_tokenizer, haystack_text, save

from memagent_graph.documents.chunking import ChunkOrigin, chunk_document
from memagent_graph.documents.haystack import needle_document
from memagent_graph.documents.sources import TextDocument
from memagent_graph.nodes.provenance import ReadChunk, trace_memory

MIN_SCORE = 75.0


def timed(function, repeats: int) -> float:
    """Median seconds of ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def synthetic(tokenizer, repeats: int) -> list[dict]:
    chunked = chunk_document(TextDocument(haystack_text(12_000, tokenizer)), tokenizer, 5000)
    text, elsewhere = chunked.chunk_text(0), chunked.chunk_text(1)
    chunk = ReadChunk("doc", 0, text, ChunkOrigin(0, 0, 0, 1), None)
    rng = random.Random(0)
    own = [s.strip() for s in text.replace("\n", " ").split(". ") if len(s.strip()) > 30]
    other = [s.strip() for s in elsewhere.replace("\n", " ").split(". ") if len(s.strip()) > 30]
    rows = []
    for memory_tokens in (256, 1024):
        sentences: list[str] = []
        while tokenizer.count(". ".join(sentences)) < memory_tokens:
            sentences.append(rng.choice(own if len(sentences) % 2 == 0 else other))
        memory = ".\n".join(sentences) + "."
        seconds = timed(lambda m=memory: trace_memory(m, chunk=chunk, previous=[], min_score=MIN_SCORE), repeats)
        spans = trace_memory(memory, chunk=chunk, previous=[], min_score=MIN_SCORE)
        rows.append(
            {
                "chunk_tokens": len(chunked.chunk_ids(0)),
                "memory_tokens": tokenizer.count(memory),
                "spans": len(spans),
                "supported": sum(bool(s["sources"]) for s in spans),
                "trace_ms": round(1000 * seconds, 2),
            }
        )
    return rows


def embedded(documents: int, repeats: int) -> list[dict]:
    from memagent_graph import MemAgent
    from memagent_graph.integrations.model_choice import choose_model, reading_config

    choice, config = choose_model(), reading_config()
    agent = MemAgent(choice.model, config=config, tokenizer=choice.tokenizer)
    rows = []
    for seed in range(documents):
        task = needle_document(tokens=4096, tokenizer=choice.tokenizer, seed=100 + seed)
        source = TextDocument(task.text)
        chunked = agent.chunk(source)
        *events, result = agent.stream(task.question, source)  # progress events carry each update's memory
        memories = [event["memory"] for event in events]
        updates = [step["latency_s"] for step in result.steps if step["node"] == "update_memory"]
        previous: list = []
        for index, memory in enumerate(memories):
            chunk = ReadChunk("doc", index, chunked.chunk_text(index), chunked.chunk_origin(index), None)
            seconds = timed(
                lambda m=memory, c=chunk, p=previous: trace_memory(m, chunk=c, previous=p, min_score=MIN_SCORE),
                repeats,
            )
            previous = trace_memory(memory, chunk=chunk, previous=previous, min_score=MIN_SCORE)
            rows.append(
                {
                    "document": seed,
                    "chunk": index,
                    "update_s": round(updates[index], 3),
                    "trace_ms": round(1000 * seconds, 3),
                    "share": round(seconds / updates[index], 5),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--documents", type=int, default=2)
    args = parser.parse_args()
    tokenizer = benchmark_tokenizer()
    rows = synthetic(tokenizer, args.repeats)
    for row in rows:
        print(
            f"5,000-token chunk, {row['memory_tokens']}-token memory ({row['spans']} spans, "
            f"{row['supported']} found): {row['trace_ms']} ms"
        )
    reads = embedded(args.documents, args.repeats)
    for row in reads:
        print(
            f"embedded read {row['document']} chunk {row['chunk']}: update {row['update_s']} s, "
            f"trace {row['trace_ms']} ms ({100 * row['share']:.3f}%)"
        )
    save("evidence_alignment", {"synthetic": rows, "embedded": reads, "repeats": args.repeats})


if __name__ == "__main__":
    main()

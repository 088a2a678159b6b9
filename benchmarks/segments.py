"""Parallel segments: latency and accuracy against sequential reading (MemAgent as published), side by side.

Latency: one long needle document (>= 256 chunks) on the simulated OpenAI-compatible server (loopback HTTP, its
own process, a fixed delay per call, ``--slots`` calls served at once), read with segments P = 1, 2, 4, 8, 16,
merge included.
Accuracy: generated held-out tasks (RULER's wording, evaluation seeds) read sequentially and with P segments,
by the simulated server's rule model or by the embedded engine (SmolLM2, quote memory):

    python benchmarks/segments.py latency [--latency 0.5] [--slots 8] [--chunks 260]
    python benchmarks/segments.py accuracy --model simulated --latency 0 --lengths 16k,64k --samples 20
    python benchmarks/segments.py accuracy --model embedded --lengths 16k --samples 10
"""

from __future__ import annotations

import argparse
import contextlib
import random
import time
from collections.abc import Iterator
from typing import Any

from common import benchmark_tokenizer, save, simulated_server_process
from langchain_core.language_models import BaseChatModel
from tqdm import tqdm

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.documents.haystack import needle_document
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.integrations import openai_compatible
from memagent_graph.training.data.task_suite import suite_task
from memagent_graph.training.data.tasks import Task
from memagent_graph.training.rewards import get_reward

TASKS = ("niah_single_2", "niah_multikey_1", "two_hop", "vt")
SIMULATED_TASKS = ("needle", "updated")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("latency", "accuracy"))
    parser.add_argument("--latency", type=float, default=0.5, help="simulated server: seconds per completion")
    parser.add_argument("--slots", type=int, default=8, help="simulated server: completions served at once")
    parser.add_argument("--chunks", type=int, default=260, help="latency: chunks in the document")
    parser.add_argument("--counts", default="1,2,4,8,16", help="latency: segment counts")
    parser.add_argument("--model", choices=("simulated", "embedded"), default="simulated")
    parser.add_argument("--segments", type=int, default=8, help="accuracy: segments compared with sequential")
    parser.add_argument("--tasks", help=f"default: {','.join(TASKS)}; simulated: {','.join(SIMULATED_TASKS)}")
    parser.add_argument("--lengths", default="16k,64k")
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--output", help="accuracy: result name (default segments_accuracy_<model>)")
    args = parser.parse_args()
    args.output = args.output or f"segments_accuracy_{args.model}"
    args.tasks = args.tasks or ",".join(TASKS if args.model == "embedded" else SIMULATED_TASKS)
    if args.part == "latency":
        save(f"segments_latency_{args.slots}_slots", latency(args))
    else:
        accuracy(args)


@contextlib.contextmanager
def _simulated(args: argparse.Namespace, tokenizer: Tokenizer) -> Iterator[BaseChatModel]:
    """A client of the simulated server in its own process."""
    with simulated_server_process(delay_s=args.latency, slots=args.slots) as url:
        yield openai_compatible(url, "rule-model", tokenizer=tokenizer)


def latency(args: argparse.Namespace) -> dict[str, Any]:
    """Seconds to read one document with each segment count; the speed-up over sequential."""
    tokenizer = benchmark_tokenizer()
    base = MemAgentConfig(chunk_tokens=300, memory_tokens=100, answer_tokens=30, temperature=0.0)
    task = needle_document(tokens=args.chunks * 300 - 100, tokenizer=tokenizer, seed=1, depth=0.3)
    rows = []
    with _simulated(args, tokenizer) as model:
        for count in (int(c) for c in args.counts.split(",")):
            agent = MemAgent(model, config=base.model_copy(update={"segments": count}), tokenizer=tokenizer)
            started = time.perf_counter()
            result = agent.invoke(task.question, TextDocument(task.text))
            seconds = time.perf_counter() - started
            rows.append(
                {
                    "segments": count,
                    "chunks": result.num_chunks,
                    "calls": result.usage["calls"],
                    "seconds": round(seconds, 2),
                    "right": result.answer == task.answer,
                }
            )
    for row in rows:
        row["speedup"] = round(rows[0]["seconds"] / row["seconds"], 2)
    print("segments  chunks  calls  seconds  speedup  right")
    for row in rows:
        print(
            f"{row['segments']:>8}  {row['chunks']:>6}  {row['calls']:>5}  {row['seconds']:>7}  "
            f"{row['speedup']:>7}  {row['right']}"
        )
    return {"latency_s": args.latency, "slots": args.slots, "rows": rows}


def accuracy(args: argparse.Namespace) -> None:
    """RULER match (%) of sequential and segmented reads of the same held-out documents, per task and length:
    the task suite's families on the embedded engine; on the simulated server, whose rule model knows only "The
    special magic X is Y." facts, a needle at a random depth and an updated needle (the same key twice, the
    later value the answer: the merge must keep document order). Saved after every cell, so a long run stopped
    early keeps what it measured."""
    with _accuracy_model(args) as (model, tokenizer, config):
        cells = []
        for length in args.lengths.split(","):
            tokens = int(length.lower().removesuffix("k")) * 1024
            for name in args.tasks.split(","):
                tasks = [_task(name, i, tokens=tokens, tokenizer=tokenizer) for i in range(args.samples)]
                cell: dict[str, Any] = {"task": name, "length": length, "documents": len(tasks)}
                for count in (1, args.segments):
                    agent = MemAgent(model, config=config.model_copy(update={"segments": count}), tokenizer=tokenizer)
                    scores, started = [], time.perf_counter()
                    for task in tqdm(tasks, desc=f"{name} {length} P={count}", leave=False):
                        answer = agent.invoke(task.question, TextDocument(task.document)).answer
                        scores.append(get_reward("ruler_match_all")(answer, task.golds))
                    cell[f"P={count}"] = round(100 * sum(scores) / len(scores), 1)
                    cell[f"P={count} s/doc"] = round((time.perf_counter() - started) / len(tasks), 2)
                print(cell, flush=True)
                cells.append(cell)
                save(args.output, {"model": args.model, "segments": args.segments, "cells": cells})


def _task(name: str, index: int, *, tokens: int, tokenizer: Tokenizer) -> Task:
    """Held-out task ``index`` of family ``name``, or the simulated server's ``needle`` / ``updated``."""
    if name not in ("needle", "updated"):
        return suite_task(name, index, tokens=tokens, tokenizer=tokenizer, split="eval")
    rng = random.Random(index)
    depth = rng.random() if name == "needle" else rng.uniform(0.5, 0.95)  # an update comes after the old value
    needle = needle_document(tokens=tokens, tokenizer=tokenizer, seed=10_000 + index, depth=depth)
    if name == "needle":
        return Task(needle.question, needle.text, [needle.answer])
    earlier = needle_document(tokens=tokens, tokenizer=tokenizer, seed=20_000 + index)
    old = f"{needle.question.removeprefix('What is ').rstrip('?').capitalize()} is {earlier.answer}."
    cut = len(needle.text) * rng.randint(5, 40) // 100
    return Task(needle.question, needle.text[:cut] + f"\n\n{old}\n\n" + needle.text[cut:], [needle.answer])


@contextlib.contextmanager
def _accuracy_model(args: argparse.Namespace) -> Iterator[tuple[BaseChatModel, Tokenizer, MemAgentConfig]]:
    if args.model == "embedded":
        from memagent_graph.integrations.model_choice import EMBEDDED_READING
        from memagent_graph.integrations.models.embedded_chat import embedded_chat_model

        model = embedded_chat_model()
        yield model, model.tokenizer(), MemAgentConfig(**EMBEDDED_READING)
        return
    tokenizer = benchmark_tokenizer()
    with _simulated(args, tokenizer) as model:
        yield model, tokenizer, MemAgentConfig(chunk_tokens=2048, memory_tokens=256, answer_tokens=64, temperature=0.0)


if __name__ == "__main__":
    main()

"""The answer step alone, on real text: given the verse that answers, which phrase does each answer mode give?

For each mined question of a split (``validation``: Judges, the book settings are chosen on), the answering
verse (the evidence verse holding the gold answer) goes to the quote policy's answer step as if it were the
kept note, and each mode answers from it: ``span`` (the hand-written rules, with `span_gains` ranking) and
``extract`` (the model scores the note's phrases, `quote.extraction`), also at each ``--prior-weights`` value
(``extract@w``: the same scores, another weight of the candidates' prior). Reports exact match, sub-EM and F1
per mode and per hop count, and seconds per question. The embedded SmolLM2 engine at its default dtype.

    python benchmarks/answer_extraction.py --split validation \
        --output benchmarks/results/answer_extraction/validation.json
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from memagent_graph.integrations.models.embedded_chat import embedded_chat_model
from memagent_graph.nodes.quote.answer import answer_span, span_gains
from memagent_graph.nodes.quote.extraction import score_spans
from memagent_graph.nodes.quote.scoring import GainCache, ScoreTally
from memagent_graph.training.data.real_text import RealTextTask, real_text_tasks
from memagent_graph.training.rewards import exact_match, substring_match, token_f1


def answering_verse(task: RealTextTask) -> str:
    """The last evidence verse that holds a gold answer (the last hop's statement)."""
    return next((verse for verse in reversed(task.evidence) if substring_match(verse, task.golds)), task.evidence[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=["train", "validation"], default="validation")
    parser.add_argument("--limit", type=int, default=None, help="the first N questions (default: all)")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument(
        "--prior-weights",
        type=lambda text: [float(w) for w in text.split(",")],
        default=[0.0, 0.25, 0.5, 0.75, 1.0],
        help="extract at each weight of the candidates' prior (the shipped one is also reported as 'extract')",
    )
    args = parser.parse_args()

    model = embedded_chat_model()
    model.load()
    cache = GainCache(model)
    tasks = real_text_tasks(args.split, tokens=4096, tokenizer=model.tokenizer(), limit=args.limit)
    scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    seconds: dict[str, float] = defaultdict(float)
    answers = []
    for task in tasks:
        verse, known = answering_verse(task), task.entities[1] if task.hops == 2 else ""
        rank = functools.partial(span_gains, cache, question=task.question, line=verse, tally=ScoreTally(len))
        started = time.perf_counter()
        given = {"span": answer_span(verse, task.question, known=known, context=verse, rank=rank)}
        seconds["span"] += time.perf_counter() - started
        started = time.perf_counter()
        scored = score_spans(verse, task.question, model, known=known, context=verse)
        seconds["extract"] += time.perf_counter() - started
        given |= {"extract": scored.best(), **{f"extract@{w:g}": scored.best(w) for w in args.prior_weights}}
        for mode, answer in given.items():
            for key in ("all", f"{task.hops}-hop"):
                scores[mode][f"{key} exact"].append(exact_match(answer, task.golds))
                scores[mode][f"{key} sub-EM"].append(substring_match(answer, task.golds))
                scores[mode][f"{key} F1"].append(token_f1(answer, task.golds))
        answers.append({"question": task.question, "golds": list(task.golds), "verse": verse, **given})
        print(json.dumps(answers[-1]), flush=True)
        report = {
            "split": args.split,
            "machine": platform.processor() or platform.machine(),
            "command": " ".join(sys.argv),
            "table": summarize(scores, seconds, len(answers)),
        }
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({**report, "answers": answers}, indent=1) + "\n")  # kept as they come
    print(json.dumps(report, indent=1))


def summarize(scores: dict[str, dict[str, list[float]]], seconds: dict[str, float], n: int) -> dict[str, Any]:
    """Per mode: each score's mean in %, n, and seconds per question (extract's at every weight: one scoring)."""
    return {
        mode: {
            **{name: round(100 * sum(v) / len(v), 1) for name, v in sorted(values.items())},
            "n": n,
            "s/question": round(seconds[mode.split("@")[0]] / n, 2),
        }
        for mode, values in scores.items()
    }


if __name__ == "__main__":
    main()

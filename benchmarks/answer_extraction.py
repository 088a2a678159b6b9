"""The answer step alone, on real text: given the verse that answers, which phrase does each answer mode give?

For each mined question of a split (``validation``: Judges, the book settings are chosen on), the answering
verse (the evidence verse holding the gold answer) goes to the quote policy's answer step as if it were the
kept note, and each mode answers from it: ``span`` (the hand-written rules, with `span_gains` ranking) and
``extract`` (the model scores the note's phrases, `quote.extraction`), also at each ``--prior-weights`` and
``--distance-weights`` value (``extract@w,d``: the same scores, another weight of the candidates' prior and of
their distance in words from the names the question gives). Reports exact match, sub-EM and F1 per mode and per
hop count, and seconds per question. The embedded SmolLM2 engine at its default dtype.

    python benchmarks/answer_extraction.py --split validation \
        --output benchmarks/results/answer_extraction/validation.json

With ``--memories`` (the rows of a `quote_study.py` run, which keep each read's final memory) the notes are a
whole memory instead, and the modes choose the line too: ``best-note`` extracts from the note with the best gain
(the shipped answer without its swap to a second hop), ``joint@k,λ`` scores the phrases of the k best notes
and answers with the phrase whose score plus λ times its note's gain (relative to the best note's) is highest.
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
from memagent_graph.nodes.quote.extraction import DISTANCE_WEIGHT, score_spans
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
    parser.add_argument(
        "--distance-weights",
        type=lambda text: [float(w) for w in text.split(",")],
        default=[0.0, 0.25, 0.5, 1.0, 2.0],
        help="and at each weight of a candidate's distance from the names asked (nats per word)",
    )
    parser.add_argument("--memories", type=Path, default=None, help="a quote_study.py output: answer from its memories")
    parser.add_argument("--variant", help="with --memories: only this variant's reads")
    args = parser.parse_args()
    if args.memories is not None:
        return memory_study(args)

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
        given |= {"extract": scored.best()}
        given |= {f"extract@{w:g},{d:g}": scored.best(w, d) for w in args.prior_weights for d in args.distance_weights}
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


JOINT = [(k, weight) for k in (1, 2, 3, 8) for weight in (0.0, 0.1, 0.25, 0.5, 1.0)]
"""The (notes scored, weight of a note's gain) pairs ``--memories`` compares."""


def memory_study(args: argparse.Namespace) -> None:
    """The answer step over whole memories (module doc): every mode from one scoring of each note's phrases."""
    rows = [row for row in json.loads(args.memories.read_text())["rows"] if row["memory"].strip()]
    if args.variant:
        rows = [row for row in rows if row["variant"] == args.variant]
    model = embedded_chat_model()
    model.load()
    cache = GainCache(model)
    scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    answers = []
    for row in rows[: args.limit]:
        question, notes = row["question"], [line for line in row["memory"].splitlines() if line.strip()]
        gains = cache.gains(question, notes)
        order = sorted(range(len(notes)), key=lambda i: -gains[i])
        scored = [score_spans(notes[i], question, model, context=row["memory"]) for i in order]
        given = {"best-note": scored[0].best(distance_weight=0), "best-note+near": scored[0].best()}
        for k, weight in JOINT:
            for near in (0.0, DISTANCE_WEIGHT):
                options = [
                    (score + weight * (gains[i] - gains[order[0]]), span)
                    for i, note in zip(order[:k], scored[:k], strict=False)
                    for score, span in zip(note.scores(distance_weight=near), note.spans, strict=True)
                ]
                name = f"joint@{k},{weight:g}{'+near' if near else ''}"
                given[name] = max(options)[1] if options else scored[0].line
        hops = "2-hop" if len(row["evidence"]) > 1 else "1-hop"
        kept = "evidence kept" if row["evidence_kept"] == 1 else "evidence lost"
        for mode, answer in given.items():
            for key in ("all", hops, kept):
                scores[mode][f"{key} exact"].append(exact_match(answer, row["golds"]))
                scores[mode][f"{key} sub-EM"].append(substring_match(answer, row["golds"]))
        answers.append({"question": question, "golds": row["golds"], "memory": row["memory"], **given})
        print(json.dumps(answers[-1]), flush=True)
    table = {mode: {k: round(100 * sum(v) / len(v), 1) for k, v in sorted(vs.items())} for mode, vs in scores.items()}
    report = {"memories": str(args.memories), "n": len(answers), "command": " ".join(sys.argv), "table": table}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({**report, "answers": answers}, indent=1) + "\n")
    for mode, row in table.items():
        print(mode, row)


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

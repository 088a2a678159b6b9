"""The answer step alone, on real text: given the verse that answers, which phrase does each answer mode give?

For each mined question of a split (``validation``: Judges, the book settings are chosen on), the answering
verse (the evidence verse holding the gold answer) goes to the quote policy's answer step as if it were the
kept note, and each mode answers from it: ``span`` (the hand-written rules, with `span_gains` ranking) and
``extract`` (the model scores the note's phrases, `quote.extraction`), also at each ``--prior-weights`` and
``--distance-weights`` value (``extract@w,d``: the same scores, another weight of the candidates' prior and of
their distance in words from the names the question gives). Reports exact match, sub-EM and F1 per mode and per
hop count, and seconds per question. The embedded SmolLM2 engine at its default dtype, or ``--model-dir`` (a local
model folder: Gemma 3 270M from `gemma_model.py`) on the same questions and memories.

    python benchmarks/answer_extraction.py --split validation \
        --output benchmarks/results/answer_extraction/validation.json

With ``--memories`` (the rows of a `quote_study.py` run, which keep each read's final memory, or ``bm25``: the
split's tasks at ``--tokens`` with the memory the `bm25-sentences` baseline keeps) the notes are a whole memory
instead, and the modes choose the line too: ``best-note+near`` extracts from the note with the best gain (the
shipped answer without its swap to a second hop; ``best-note`` without the distance weight); ``joint@k,λ``
scores the phrases of the k best notes and answers with the phrase whose score plus λ times its note's gain
(relative to the best note's) is highest (``+near,P``: with the distance weight, and P nats off the phrases of a
note that names nothing the question names); ``whole@λ,P`` scores every note's phrases with the whole memory as
the passage (one prompt: the model reads all the notes, as a reader of a short text would), plus λ times its
note's relative gain, less P likewise; ``best-phrase, best note for a quantity`` is ``joint@3,0.25+near,20`` but
for a quantity question (`asks_quantity`), which ``best-note+near`` answers.
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

from memagent_graph.integrations.model_choice import EMBEDDED_READING
from memagent_graph.integrations.models.embedded_chat import embedded_chat_model, embedded_tokenizer
from memagent_graph.nodes.quote.answer import answer_span, span_gains
from memagent_graph.nodes.quote.extraction import (
    DISTANCE_WEIGHT,
    PRIOR_WEIGHT,
    PROMPT,
    asked_names,
    asks_quantity,
    candidate_spans,
    score_spans,
    word_distances,
)
from memagent_graph.nodes.quote.memory import split_sentences
from memagent_graph.nodes.quote.scoring import GainCache, ScoreTally
from memagent_graph.training.data.real_text import RealTextTask, real_text_tasks
from memagent_graph.training.eval.sentence_baselines import bm25_ranking, kept_sentences
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
    parser.add_argument(
        "--memories",
        default=None,
        help="a quote_study.py output, or 'bm25' (the bm25-sentences baseline's memories): answer from its memories",
    )
    parser.add_argument("--tokens", type=int, default=16384, help="with --memories bm25: the documents' length")
    parser.add_argument("--variant", help="with --memories: only this variant's reads")
    parser.add_argument(
        "--no-whole", action="store_true", help="with --memories: skip the whole@ modes (the slowest to score)"
    )
    parser.add_argument(
        "--model-dir", default=None, help="a local Hugging Face model folder to score with (default: SmolLM2)"
    )
    args = parser.parse_args()
    if args.memories is not None:
        return memory_study(args)

    model = embedded_chat_model(model_path=args.model_dir)
    model.load()
    cache = GainCache(model)
    tasks = real_text_tasks(args.split, tokens=4096, tokenizer=embedded_tokenizer(), limit=args.limit)
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
            "model": model._identifying_params["model_name"],
            "machine": platform.processor() or platform.machine(),
            "command": " ".join(sys.argv),
            "table": summarize(scores, seconds, len(answers)),
        }
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({**report, "answers": answers}, indent=1) + "\n")  # kept as they come
    print(json.dumps(report, indent=1))


JOINT = [(k, weight) for k in (1, 2, 3, 8) for weight in (0.0, 0.1, 0.25, 0.5, 1.0)]
"""The (notes scored, weight of a note's gain) pairs ``--memories`` compares."""
WHOLE = (0.0, 0.1, 0.25, 0.5, 1.0)
"""The weights of a note's gain ``whole@λ,P`` compares."""
UNNAMED = (0.0, 5.0, 10.0, 20.0)
"""The nats taken off the phrases of a note that names nothing the question names (``+near,P``, ``whole@λ,P``):
`word_distances` counts 0 words for every phrase of such a note, as if each stood next to the name asked."""


def whole_memory_options(model: Any, question: str, notes: list[str]) -> list[tuple[float, int, str]]:
    """(score, note index, phrase) for every candidate phrase of every note, each scored as the answer with the
    whole memory as the passage (`PROMPT`), less the shipped prior and distance weights (distance within its
    own note)."""
    memory = "\n".join(notes)
    places = [
        (index, note, spans)
        for index, note in enumerate(notes)
        if (spans := candidate_spans(note, asked=question, context=memory))
    ]
    found = {}
    for index, note, spans in places:
        for (start, end), distance in zip(spans, word_distances(note, spans, asked=question), strict=True):
            found.setdefault(note[start:end], (index, distance))
    phrases = list(found)
    continuations = [f" {phrase}\n" for phrase in phrases]
    given = model.score_continuations(PROMPT.format(line=memory, question=question), continuations)
    prior = model.score_continuations(PROMPT.format(line="", question=question), continuations)
    return [
        (g - PRIOR_WEIGHT * p - DISTANCE_WEIGHT * found[phrase][1], found[phrase][0], phrase)
        for g, p, phrase in zip(given, prior, phrases, strict=True)
    ]


def bm25_rows(split: str, *, tokens: int, tokenizer: Any, limit: int | None) -> list[dict[str, Any]]:
    """The first ``limit`` tasks of ``split`` as memory rows: the sentences the `bm25-sentences` baseline keeps
    in the shipped memory budget (`kept_sentences`), with the question, golds and evidence verses."""
    rows = []
    for task in real_text_tasks(split, tokens=tokens, tokenizer=tokenizer, limit=limit):
        kept = kept_sentences(
            task.question,
            task.document,
            tokenizer,
            ranking=bm25_ranking,
            memory_tokens=EMBEDDED_READING["memory_tokens"],
        )
        lines = {sentence.text for sentence in kept}
        held = [all(part in lines for part in split_sentences(verse)) for verse in task.evidence]
        rows.append(
            {
                "question": task.question,
                "golds": list(task.golds),
                "evidence": list(task.evidence),
                "memory": "\n".join(sentence.text for sentence in kept),
                "evidence_kept": sum(held) / len(held),
            }
        )
    return rows


def memory_study(args: argparse.Namespace) -> None:
    """The answer step over whole memories (module doc): every mode from one scoring of each note's phrases."""
    model = embedded_chat_model(model_path=args.model_dir)
    model.load()
    if args.memories == "bm25":
        # SmolLM2's tokens for every model: the same documents and the same memories
        rows = bm25_rows(args.split, tokens=args.tokens, tokenizer=embedded_tokenizer(), limit=args.limit)
    else:
        rows = [row for row in json.loads(Path(args.memories).read_text())["rows"] if row["memory"].strip()]
    if args.variant:
        rows = [row for row in rows if row["variant"] == args.variant]
    cache = GainCache(model)
    scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    answers: list[dict[str, Any]] = []
    table: dict[str, dict[str, float]] = {}
    for row in rows[: args.limit]:
        question, notes = row["question"], [line for line in row["memory"].splitlines() if line.strip()]
        gains = cache.gains(question, notes)
        order = sorted(range(len(notes)), key=lambda i: -gains[i])
        scored = [score_spans(notes[i], question, model, context=row["memory"]) for i in order]
        given = {"best-note": scored[0].best(distance_weight=0), "best-note+near": scored[0].best()}
        unnamed = [0.0 if asked_names(note, asked=question) else 1.0 for note in notes]
        for k, weight in JOINT:
            for near, penalty in ((0.0, 0.0), *((DISTANCE_WEIGHT, p) for p in UNNAMED)):
                options = [
                    (score + weight * (gains[i] - gains[order[0]]) - penalty * unnamed[i], span)
                    for i, note in zip(order[:k], scored[:k], strict=False)
                    for score, span in zip(note.scores(distance_weight=near), note.spans, strict=True)
                ]
                name = f"joint@{k},{weight:g}{f'+near,{penalty:g}' if near else ''}"
                given[name] = max(options)[1] if options else scored[0].line
        given["best-phrase, best note for a quantity"] = (
            given["best-note+near"] if asks_quantity(question) else given["joint@3,0.25+near,20"]
        )
        if not args.no_whole:
            whole = whole_memory_options(model, question, notes)
            for weight in WHOLE:
                for penalty in (0.0, *UNNAMED):
                    best = max(
                        (
                            (score + weight * (gains[i] - gains[order[0]]) - penalty * unnamed[i], phrase)
                            for score, i, phrase in whole
                        ),
                        default=None,
                    )
                    given[f"whole@{weight:g},{penalty:g}"] = best[1] if best else scored[0].line
        hops = "2-hop" if len(row["evidence"]) > 1 else "1-hop"
        kept = "evidence kept" if row["evidence_kept"] == 1 else "evidence lost"
        for mode, answer in given.items():
            for key in ("all", hops, kept):
                scores[mode][f"{key} exact"].append(exact_match(answer, row["golds"]))
                scores[mode][f"{key} sub-EM"].append(substring_match(answer, row["golds"]))
        answers.append({"question": question, "golds": row["golds"], "memory": row["memory"], **given})
        print(json.dumps(answers[-1]), flush=True)
        table = {
            mode: {k: round(100 * sum(v) / len(v), 1) for k, v in sorted(vs.items())} for mode, vs in scores.items()
        }
        report = {
            "memories": args.memories,
            "model": model._identifying_params["model_name"],
            "n": len(answers),
            "command": " ".join(sys.argv),
            "table": table,
        }
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({**report, "answers": answers}, indent=1) + "\n")  # kept as they come
    for mode, cells in table.items():
        print(mode, cells)


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

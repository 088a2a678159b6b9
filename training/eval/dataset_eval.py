"""`memagent eval --dataset FILE`: MemAgent and the baselines on the rows of a data file, scored with every metric
MemAgent's evaluation uses, one line per answer appended as it comes so a stopped run resumes where it was.

Metrics (each the best over the row's gold answers; MemAgent's own scripts use the first gold only): normalised
exact match, sub-EM (a gold inside the answer, or the answer inside a gold) and each of its two directions,
token F1, the training verifier (the boxed answer, exact), and for RULER rows RULER's ``string_match_all``.
The headline: sub-EM, what MemAgent's RULER-HotpotQA "accuracy" most likely is (its repository leaves the
choice open, issue #24); ``string_match_all`` for RULER rows, as RULER reports them.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any

from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.training.data.datasets import Dataset, DatasetRow
from memagent_graph.training.eval.record_log import RecordLog
from memagent_graph.training.rewards import (
    answer_in_gold,
    exact_match,
    gold_in_answer,
    memagent_verifier,
    ruler_match_all,
    substring_match,
    token_f1,
)

if TYPE_CHECKING:
    from memagent_graph.training.eval.baselines import Reader


def headline_metric(format: str) -> str:
    """The metric a file's rows are ranked by: RULER's string match for RULER rows, sub-EM for the others."""
    return "ruler_match_all" if format == "ruler" else "sub_em"


def answer_metrics(answer: str, reply: str, golds: Sequence[str], *, ruler: bool = False) -> dict[str, float]:
    """Every metric of one answer (``reply``: the reader's whole reply, for the verifier)."""
    scores = {
        "sub_em": substring_match(answer, golds),
        "exact_match": exact_match(answer, golds),
        "sub_em_gold_in_answer": gold_in_answer(answer, golds),
        "sub_em_answer_in_gold": answer_in_gold(answer, golds),
        "token_f1": token_f1(answer, golds),
        "verifier": memagent_verifier(reply, golds),
    }
    return scores | ({"ruler_match_all": ruler_match_all(answer, golds)} if ruler else {})


@dataclass(frozen=True)
class RowRecord:
    """One method's answer to one row of the file."""

    row: int
    id: str
    method: str
    answer: str | None
    """None when the method could not run (the document does not fit the window)."""
    reply: str | None
    golds: list[str]
    tokens: int
    seconds: float
    metrics: dict[str, float] = field(default_factory=dict)
    citation_recall: float | None = None
    grounded: float | None = None


def answer_row(row: DatasetRow, method: str, read: Reader, *, tokenizer: Tokenizer) -> RowRecord:
    """Read ``row``'s document with ``read`` and score its answer."""
    from memagent_graph.nodes.answer_extraction import extract_answer
    from memagent_graph.training.data.tasks import Task
    from memagent_graph.training.eval.evaluation import citation_scores

    started = time.perf_counter()
    reading = read(row.question, row.document)
    seconds = round(time.perf_counter() - started, 2)
    answer = None if reading is None else extract_answer(reading.reply)[0]
    metrics = {} if reading is None else answer_metrics(answer, reading.reply, row.answers, ruler=row.format == "ruler")
    task = Task(row.question, row.document, list(row.answers), row.evidence)
    recall, grounded = citation_scores(reading, answer, task)
    return RowRecord(
        row.row, row.id, method, answer, None if reading is None else reading.reply, list(row.answers),
        tokenizer.count(row.document), seconds, metrics, recall, grounded,
    )  # fmt: skip


def evaluate_rows(
    dataset: Dataset,
    *,
    readers: dict[str, Reader],
    tokenizer: Tokenizer,
    limit: int | None,
    done: set[tuple[int, str]],
    on_record: Callable[[RowRecord], None],
    progress: bool = False,
) -> None:
    """Answer the first ``limit`` good rows (all when None) with every reader, skipping the (row, method) pairs
    in ``done``; each record goes to ``on_record`` as soon as it is scored."""
    from tqdm import tqdm

    rows = dataset.num_rows if limit is None else limit if dataset.num_rows is None else min(limit, dataset.num_rows)
    total = None if rows is None else rows * len(readers)
    with tqdm(total=total, desc="eval", unit="answer", disable=not progress, file=sys.stderr) as bar:
        for row in islice(dataset.rows(), limit):
            for method, read in readers.items():
                if (row.row, method) not in done:
                    on_record(answer_row(row, method, read, tokenizer=tokenizer))
                bar.set_postfix_str(f"row {row.row} {method}")
                bar.update()


def summarize_rows(records: Sequence[RowRecord]) -> dict[str, dict[str, float | int]]:
    """Per method: the mean of every metric over the rows it answered, and how many it could not run."""
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    missing: dict[str, int] = defaultdict(int)
    for record in records:
        if record.answer is None:
            missing[record.method] += 1
        for name, value in record.metrics.items():
            values[record.method][name].append(value)
        for name in ("citation_recall", "grounded"):
            if (value := getattr(record, name)) is not None:
                values[record.method][name].append(value)
    methods = dict.fromkeys(record.method for record in records)
    return {
        method: {name: sum(v) / len(v) for name, v in values[method].items()} | {"not_run": missing[method]}
        for method in methods
    }


def format_rows_table(summary: dict[str, dict[str, float | int]], *, headline: str) -> str:
    """A Markdown table, one row per method, the headline metric first, scores in percent."""
    names = list(dict.fromkeys(n for scores in summary.values() for n in scores if n != "not_run"))
    names = [headline, *(n for n in names if n != headline)]
    lines = ["| method | " + " | ".join(names) + " | not run |", "|---|" + "---|" * (len(names) + 1)]
    for method, scores in summary.items():
        cells = ["n/a" if n not in scores else f"{100 * scores[n]:.1f}" for n in names]
        lines.append(f"| {method} | " + " | ".join(cells) + f" | {scores['not_run']} |")
    return "\n".join(lines)


HEADLINES = {
    "sub_em": "sub-EM (a gold answer inside the answer or the answer inside a gold; MemAgent's likely accuracy)",
    "ruler_match_all": "RULER's string_match_all (the share of gold strings found in the answer)",
}


def write_dataset_results(log: RecordLog[RowRecord], *, headline: str, skipped: int, settings: dict[str, Any]) -> str:
    """``results.json`` (settings, headline, summary, every answer) and ``results.md`` in the log's folder; returns
    the report printed for the user."""
    records = log.records()
    summary = summarize_rows(records)
    report = f"Headline: {HEADLINES[headline]}; scores in %\n\n{format_rows_table(summary, headline=headline)}"
    if skipped:
        report += f"\n\n{skipped} bad rows skipped"
    payload = {"settings": settings, "headline": headline, "skipped_rows": skipped, "summary": summary,
               "records": [asdict(record) for record in records]}  # fmt: skip
    (log.folder / "results.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    (log.folder / "results.md").write_text(report + "\n", encoding="utf-8")
    return report

"""Merge the runs of `real_text.sh` into the held-out real-text table: per length and method, the questions
answered (n), exact match, sub-EM, token F1, evidence recall (the share of the evidence verses that the kept
sentences or MemAgent's citations overlap), sub-EM on the two-hop questions, and the median seconds per
question (the first read of a run also loads the model).

    python benchmarks/real_text.py [benchmarks/results/real_text]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from statistics import mean, median

from embedded_lengths import load_records
from policy_study import write_study

from memagent_graph.integrations.models.embedded_chat import embedded_tokenizer
from memagent_graph.training.data.task_suite import generate_tasks
from memagent_graph.training.eval.evaluation import EvalRecord, format_length

METHODS = ("memagent", "bm25-sentences", "minilm-sentences", "hybrid-sentences")
RUNS = ("16k", "64k")
"""The runs of `real_text.sh` (the folder holds other studies' runs too)."""


def _percent(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{100 * mean(known):.1f}" if known else "–"


def format_real_text(records: list[EvalRecord], hops: dict[tuple[int, int], int]) -> str:
    """The Markdown table; ``hops`` maps (tokens, sample) to the question's hops."""
    cells: dict[tuple[int, str], list[EvalRecord]] = defaultdict(list)
    for record in records:
        cells[record.tokens, record.method].append(record)
    lines = [
        "| length | method | n | EM | sub-EM | F1 | evidence recall | two-hop sub-EM (n) | median s/question |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (tokens, method), rows in sorted(cells.items(), key=lambda kv: (kv[0][0], METHODS.index(kv[0][1]))):
        two_hop = [r.sub_em for r in rows if hops[tokens, r.sample] == 2]
        lines.append(
            f"| {format_length(tokens)} | {method} | {len(rows)} | {_percent([r.exact_match for r in rows])} | "
            f"{_percent([r.sub_em for r in rows])} | {_percent([r.f1 for r in rows])} | "
            f"{_percent([r.citation_recall for r in rows])} | {_percent(two_hop)} ({len(two_hop)}) | "
            f"{median(r.seconds for r in rows):.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=Path("benchmarks/results/real_text"))
    args = parser.parse_args()
    records = [r for r in load_records(args.folder, runs=RUNS) if r.task == "realtext" and r.method in METHODS]
    methods_of = defaultdict(set)
    for record in records:
        methods_of[record.tokens, record.sample].add(record.method)
    records = [r for r in records if len(methods_of[r.tokens, r.sample]) == len(METHODS)]  # every method, or none
    if not records:
        sys.exit(f"real_text: no realtext records under {args.folder}; run benchmarks/real_text.sh")
    tokenizer, hops = embedded_tokenizer(), {}
    for tokens in sorted({r.tokens for r in records}):
        count = 1 + max(r.sample for r in records if r.tokens == tokens)
        for index, task in enumerate(generate_tasks("realtext", count, tokens=tokens, tokenizer=tokenizer, seed=1)):
            hops[tokens, index] = task.hops
    write_study(args.folder, format_real_text(records, hops), records, table="table.md", plot="accuracy.png")


if __name__ == "__main__":
    main()

"""Merge the `memagent eval` runs of `embedded_lengths.sh` into one table (accuracy, exact match, sub-EM and
seconds per document per method) and a plot of accuracy against length.

    python benchmarks/embedded_lengths.py [benchmarks/results/embedded_lengths]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from policy_study import format_study, write_study

from memagent_graph.training.eval.evaluation import EvalRecord, format_table, summarize


def load_records(folder: Path, *, runs: Sequence[str] | None = None) -> list[EvalRecord]:
    """Every answer of every run under ``folder``, or of the ``runs`` named (each run's ``records.jsonl``, a cut
    last line dropped)."""
    records = []
    paths = sorted(folder.glob("*/records.jsonl")) if runs is None else [folder / run / "records.jsonl" for run in runs]
    for path in (path for path in paths if path.is_file()):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(EvalRecord(**json.loads(line)))
            except json.JSONDecodeError:
                continue
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=Path("benchmarks/results/embedded_lengths"))
    args = parser.parse_args()
    records = load_records(args.folder)
    if not records:
        sys.exit(f"embedded_lengths: no records.jsonl under {args.folder}; run benchmarks/embedded_lengths.sh")
    parts = [
        "Accuracy (RULER match, %; documents) and seconds per document\n\n" + format_study(records),
        "Exact match (%)\n\n" + format_table(summarize(records, "exact_match")),
        "Sub-EM (%)\n\n" + format_table(summarize(records, "sub_em")),
    ]
    write_study(args.folder, "\n\n".join(parts), records, table="table.md", plot="accuracy.png")


if __name__ == "__main__":
    main()

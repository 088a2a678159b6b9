"""The embedded policy study: merge `memagent eval` runs of the two memory policies into one table and plot.

Each run folder holds the ``results.json`` of one ``memagent eval`` (its settings say which memory policy read);
the merged table has one column per (method, policy) with accuracy in percent and, beside it, the mean
seconds per document. README's commands:

    memagent eval --task niah_single_2,niah_multikey_1 --lengths 4k,16k --samples 20 --seed 1 \
        --methods memagent --output-dir benchmarks/results/policy_study/quote_niah
    memagent eval --memory-policy generate ... --output-dir benchmarks/results/policy_study/generate_niah
    python benchmarks/policy_study.py benchmarks/results/policy_study/*/ --output-dir benchmarks/results/policy_study
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from memagent_graph.training.eval.evaluation import EvalRecord, format_length, plot_accuracy, summarize


def load_run(folder: Path) -> list[EvalRecord]:
    """The records of one run, each method renamed ``method (policy)`` after the run's memory policy."""
    payload = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    policy = payload["settings"]["reading"].get("memory_policy", "generate")
    return [EvalRecord(**{**r, "method": f"{r['method']} ({policy})"}) for r in payload["records"]]


def format_study(records: list[EvalRecord]) -> str:
    """A Markdown table: (task, length) rows; per method, accuracy % (samples) and mean seconds per document."""
    summary = summarize(records)
    counts: dict[tuple[str, int, str], int] = defaultdict(int)
    seconds: dict[tuple[str, int, str], float] = defaultdict(float)
    for record in records:
        key = (record.task, record.tokens, record.method)
        counts[key] += 1
        seconds[key] += record.seconds
    methods = sorted({method for _, _, method in summary})
    header = " | ".join(f"{m} | s/doc" for m in methods)
    lines = [f"| task | length | {header} |", "|---|---|" + "---|---|" * len(methods)]
    for task, tokens in sorted({(t, n) for t, n, _ in summary}):
        cells = []
        for method in methods:
            key = (task, tokens, method)
            if key not in counts:
                cells += ["–", "–"]
            else:
                cells += [f"{100 * summary[key]:.0f} ({counts[key]})", f"{seconds[key] / counts[key]:.0f}"]
        lines.append(f"| {task} | {format_length(tokens)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_study(folder: Path, report: str, records: list[EvalRecord], *, table: str, plot: str) -> None:
    """Write ``report`` to ``folder/table`` and the accuracy of ``records`` against length to ``folder/plot``;
    print the report on stdout and where both went on stderr."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / table).write_text(report + "\n", encoding="utf-8")
    plot_accuracy(summarize(records), folder / plot)
    print(report)
    print(f"wrote {folder / table} and {folder / plot}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="folders with a memagent eval results.json")
    parser.add_argument("--output-dir", type=Path, default=Path("benchmarks/results/policy_study"))
    args = parser.parse_args()
    missing = [str(folder) for folder in args.runs if not (folder / "results.json").is_file()]
    if missing:
        sys.exit(f"policy_study: no results.json in {', '.join(missing)}; run memagent eval --output-dir there")
    records = [record for folder in args.runs for record in load_run(folder)]
    write_study(args.output_dir, format_study(records), records, table="study.md", plot="study.png")


if __name__ == "__main__":
    main()

"""The quote-policy training study's table and reward plot, from what `quote_training_study.sh` wrote:

    python benchmarks/quote_training_study.py [--runs runs/quote-study]

Reads ``benchmarks/results/quote_training/<variant>-<length>/results.json`` (held-out `memagent eval` runs) and
each run's ``metrics.jsonl`` (copied next to the results, so they stay with them); writes ``table.md`` (RULER
match in %, documents, seconds per document) and ``rewards.png`` (training reward per step, greedy held-out
reward at each evaluation).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "quote_training"
VARIANTS = ("untrained", "warm", "warm_rl", "rl")
LABELS = {"untrained": "untrained", "warm": "warm start", "warm_rl": "warm start + RL", "rl": "RL only"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="runs/quote-study", help="the study's training runs")
    args = parser.parse_args()
    for variant in VARIANTS[1:]:
        metrics = Path(args.runs) / variant / "metrics.jsonl"
        if metrics.is_file():
            shutil.copy(metrics, RESULTS / f"{variant}_metrics.jsonl")
    table = _table()
    (RESULTS / "table.md").write_text(table)
    print(table)
    _plot(RESULTS / "rewards.png")


def _table() -> str:
    cells: dict[tuple[str, int], dict[str, str]] = {}
    for variant in VARIANTS:
        for path in sorted(RESULTS.glob(f"{variant}-*/results.json")):
            if path.parent.name.split("-")[0] != variant:
                continue
            results = json.loads(path.read_text())
            counts: dict[tuple[str, int], int] = {}
            for record in results["records"]:
                key = (record["task"], record["tokens"])
                counts[key] = counts.get(key, 0) + 1
            for row in results["summary"]:
                key = (row["task"], row["tokens"])
                cells.setdefault(key, {})[variant] = (
                    f"{100 * row['accuracy']:.0f} ({counts[key]}), {row['seconds_per_document']:.1f} s"
                )
    header = "| task | length | " + " | ".join(LABELS[v] for v in VARIANTS) + " |"
    lines = [header, "|" + "---|" * (len(VARIANTS) + 2)]
    for (task, tokens), row in sorted(cells.items(), key=lambda item: (item[0][1], item[0][0])):
        values = " | ".join(row.get(variant, "–") for variant in VARIANTS)
        lines.append(f"| {task} | {tokens // 1024}K | {values} |")
    return "\n".join(lines) + "\n"


def _plot(path: Path) -> None:
    figure, axis = plt.subplots(figsize=(7, 4))
    for variant in VARIANTS[1:]:
        metrics = RESULTS / f"{variant}_metrics.jsonl"
        if not metrics.is_file():
            continue
        rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
        train = [(r["step"] + 1, r["reward"]) for r in rows if "reward" in r]
        held_out = [(r["step"], r["eval_reward"]) for r in rows if "eval_reward" in r]
        if train:
            axis.plot(*zip(*train, strict=True), label=f"{LABELS[variant]}: training reward")
        if held_out:
            axis.plot(*zip(*held_out, strict=True), "o--", label=f"{LABELS[variant]}: held-out (greedy)")
    axis.set_xlabel("RL step")
    axis.set_ylabel("reward (RULER match)")
    axis.set_ylim(0, 1.05)
    axis.legend(fontsize=8)
    axis.set_title("Quote policy on SmolLM2-135M: rewards (2-core CPU)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    main()

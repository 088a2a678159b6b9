"""Write generated needle tasks as JSON Lines data files: how `examples/data/needles_*.jsonl` were made.

    python examples/export_needle_tasks.py examples/data

Each line is one row of the generic format `memagent train rl` and `memagent eval --dataset` read: ``id``,
``question``, ``answers``, ``document`` and the ``evidence`` sentence (which `warm_start`'s oracle teacher
keeps). The tasks are the ones `examples/train_tiny.yaml` generates (200-token documents of the tiny policy's
tokenizer, the needle wholly inside one 128-token chunk), from the training and the evaluation seeds.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from memagent_graph.documents.tokenization import HuggingFaceTokenizer
from memagent_graph.training.rl.config import TaskSettings
from memagent_graph.training.rl.tiny_policy import build_tiny_policy

SETTINGS = TaskSettings(kind="needle", tokens=200, value_kind="word", haystack="noise")
ROWS = {"needles_train.jsonl": (256, False), "needles_eval.jsonl": (100, True)}


def export(folder: Path) -> list[Path]:
    """Write the training and evaluation files into ``folder``; returns their paths."""
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer = HuggingFaceTokenizer(build_tiny_policy(scratch) / "tokenizer.json")
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, (count, evaluation) in ROWS.items():
            tasks = SETTINGS.tasks(0, count, tokenizer=tokenizer, chunk_tokens=128, evaluation=evaluation)
            rows = [
                {"id": f"{name.split('.')[0]}-{i}", "question": t.question, "answers": t.golds,
                 "document": t.document, "evidence": list(t.evidence)}
                for i, t in enumerate(tasks)
            ]  # fmt: skip
            paths.append(folder / name)
            paths[-1].write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return paths


if __name__ == "__main__":
    for path in export(Path(sys.argv[1] if len(sys.argv) > 1 else "examples/data")):
        print(f"wrote {path}")

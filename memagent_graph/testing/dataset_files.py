"""Data files in the formats people bring, written from (question, answers, document) rows: MemAgent's training
Parquet and evaluation JSON in the released files' exact schemas, RULER JSONL, LongBench JSONL, and the generic
JSON Lines / Parquet / CSV. Tests and benchmarks write them; nothing is downloaded."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["FORMAT_WRITERS", "QARow", "memagent_train_schema", "memagent_train_record", "write_format"]


@dataclass(frozen=True)
class QARow:
    """One question about one document."""

    question: str
    answers: tuple[str, ...]
    document: str
    evidence: tuple[str, ...] = field(default=())


def memagent_train_schema():
    """The schema of MemAgent's ``hotpotqa_train_32k.parquet`` (pyarrow loads only when a file is written)."""
    import pyarrow as pa

    return pa.schema([
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())]))),
        ("context", pa.string()),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("ground_truth", pa.list_(pa.string())), ("style", pa.string())])),
        ("extra_info", pa.struct([("index", pa.int64()), ("num_docs", pa.int64()), ("question", pa.string())])),
    ])  # fmt: skip


def memagent_train_record(row: QARow, index: int, *, data_source: str = "hotpotqa") -> dict:
    """One row of MemAgent's training Parquet."""
    return {
        "data_source": data_source,
        "prompt": [{"content": row.question, "role": "user"}],
        "context": row.document,
        "ability": "memory",
        "reward_model": {"ground_truth": list(row.answers), "style": "rule"},
        "extra_info": {"index": index, "num_docs": row.document.count("Document "), "question": row.question},
    }


def write_memagent_train(path: Path, rows: Sequence[QARow], *, row_group_size: int = 2) -> Path:
    """MemAgent's training Parquet (row groups of ``row_group_size`` rows)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist([memagent_train_record(r, i) for i, r in enumerate(rows)], memagent_train_schema())
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def write_memagent_eval(path: Path, rows: Sequence[QARow]) -> Path:
    """MemAgent's evaluation JSON: one array of ``{index, input, context, answers, num_docs}``."""
    records = [
        {"index": i, "input": r.question, "context": r.document, "answers": list(r.answers), "num_docs": 1}
        for i, r in enumerate(rows)
    ]
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def _jsonl(path: Path, records: Sequence[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def write_ruler(path: Path, rows: Sequence[QARow]) -> Path:
    """RULER JSON Lines as MemAgent splits them: ``{index, input, outputs, context}``."""
    return _jsonl(
        path,
        [
            {"index": i, "input": r.question, "outputs": list(r.answers), "context": r.document}
            for i, r in enumerate(rows)
        ],
    )


def write_longbench(path: Path, rows: Sequence[QARow]) -> Path:
    """LongBench-style JSON Lines: ``{_id, input, context, answers}``."""
    return _jsonl(
        path,
        [
            {"_id": f"lb{i}", "input": r.question, "context": r.document, "answers": list(r.answers)}
            for i, r in enumerate(rows)
        ],
    )


def _generic(row: QARow, index: int) -> dict:
    record = {"id": f"q{index}", "question": row.question, "answers": list(row.answers), "document": row.document}
    return record | ({"evidence": list(row.evidence)} if row.evidence else {})


def write_generic_jsonl(path: Path, rows: Sequence[QARow]) -> Path:
    """Generic JSON Lines: ``id``, ``question``, ``answers``, ``document`` (and ``evidence`` when known)."""
    return _jsonl(path, [_generic(r, i) for i, r in enumerate(rows)])


def write_generic_parquet(path: Path, rows: Sequence[QARow]) -> Path:
    """The generic columns as Parquet (two rows per row group)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([_generic(r, i) for i, r in enumerate(rows)]), path, row_group_size=2)
    return path


def write_generic_csv(path: Path, rows: Sequence[QARow]) -> Path:
    """The generic columns as CSV; ``answers`` as a JSON list in its cell."""
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["id", "question", "answers", "document"])
        for i, r in enumerate(rows):
            writer.writerow([f"q{i}", r.question, json.dumps(list(r.answers)), r.document])
    return path


FORMAT_WRITERS = {
    "memagent-train.parquet": write_memagent_train,
    "memagent-eval.json": write_memagent_eval,
    "ruler.jsonl": write_ruler,
    "longbench.jsonl": write_longbench,
    "generic.jsonl": write_generic_jsonl,
    "generic.parquet": write_generic_parquet,
    "generic.csv": write_generic_csv,
}
"""A file name for each format, and its writer."""


def write_format(folder: Path, name: str, rows: Sequence[QARow]) -> Path:
    """Write ``rows`` into ``folder / name`` in the format `FORMAT_WRITERS` names."""
    return FORMAT_WRITERS[name](Path(folder) / name, rows)

"""Question-answering data files as people have them, streamed row by row: the same readers for training and
evaluation.

Formats (detected from the suffix and the columns), with where each keeps the question, answers and document:

- ``memagent-train``: MemAgent's training Parquet; the last user turn of ``prompt``,
  ``reward_model.ground_truth``, ``context``;
- ``memagent-eval``: MemAgent's evaluation JSON (one array); ``input``, ``answers``, ``context``;
- ``ruler``: RULER JSON Lines (or a JSON array); ``input``, ``outputs``, ``context``;
- ``longbench``: LongBench-style rows; ``input``, ``answers``, ``context``;
- ``generic``: JSON Lines, Parquet or CSV; ``question``, ``answers`` (a list, or one string), ``document``
  or ``path`` (a text file under the data file's folder), optional ``id`` and ``evidence``.

A ``columns`` mapping names the file's columns for the generic fields (``{"question": "query"}``). Nothing holds
the whole file: Parquet is read row group by row group, CSV block by block (pyarrow), JSON Lines line by line
and a JSON array through a streaming parser (ijson). A Hugging Face ``datasets.Dataset`` (or any object with
``column_names`` whose iteration yields dict rows) is read the same way.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from memagent_graph.errors import ConfigError

FIELDS = ("question", "answers", "document", "path", "id", "evidence")
"""The generic fields a ``columns`` mapping may rename."""
SCHEMAS: dict[str, dict[str, str]] = {
    "memagent-train": {"question": "prompt", "answers": "reward_model.ground_truth", "document": "context",
                       "id": "extra_info.index", "data_source": "data_source"},
    "memagent-eval": {"question": "input", "answers": "answers", "document": "context", "id": "index"},
    "ruler": {"question": "input", "answers": "outputs", "document": "context", "id": "index"},
    "longbench": {"question": "input", "answers": "answers", "document": "context", "id": "_id"},
    "generic": {"question": "question", "answers": "answers", "document": "document", "path": "path", "id": "id",
                "evidence": "evidence"},
}  # fmt: skip
"""Where each format keeps each field (dotted: inside a struct column)."""
_SKIP_HINT = 'or skip bad rows (on_bad_row="skip"; memagent: --on-bad-row skip)'
_SUFFIXES = {".parquet": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv"}


class DatasetError(ConfigError):
    """Bad data: one line naming the file, the row and the column, the problem and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.settings = ()  # the names in backticks are the file's columns, not settings a front end renames


@dataclass(frozen=True)
class DatasetRow:
    """One question about one document, as read from a data file."""

    row: int
    """0-based position in the file, counting every row (bad ones too)."""
    id: str
    question: str
    answers: tuple[str, ...]
    document: str
    data_source: str | None
    evidence: tuple[str, ...] = ()
    format: str = ""


class _BadRow(Exception):
    """A row that cannot be read: the column and the problem (the caller adds file and row)."""

    def __init__(self, column: str, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.column, self.problem, self.fix = column, problem, fix


def open_dataset(
    source: str | os.PathLike[str] | Any,
    *,
    columns: Mapping[str, str] | None = None,
    on_bad_row: Literal["error", "skip"] = "error",
    root: str | os.PathLike[str] | None = None,
) -> Dataset:
    """A data file (format detected), or a Hugging Face ``datasets.Dataset``; ``root``: the folder ``path`` rows
    are relative to (default: the file's folder; required for path rows of an in-memory dataset)."""
    return Dataset(source, columns=columns, on_bad_row=on_bad_row, root=root)


class Dataset:
    """The rows of one data file (see the module doc); `rows` streams them, `check` reads the first ones."""

    def __init__(
        self,
        source: str | os.PathLike[str] | Any,
        *,
        columns: Mapping[str, str] | None,
        on_bad_row: Literal["error", "skip"],
        root: str | os.PathLike[str] | None,
    ) -> None:
        self.records = _record_reader(source)
        self.name, self.on_bad_row = self.records.name, on_bad_row
        self.root = Path(root) if root is not None else self.records.folder
        self.num_rows: int | None = self.records.num_rows
        self.columns = self.records.columns()
        self.format, self.schema = _detect(self.records, self.columns, columns)
        self.skipped = 0

    def rows(self, start: int = 0) -> Iterator[DatasetRow]:
        """The good rows whose `DatasetRow.row` is ``start`` or later, read as they are needed."""
        return self._rows(start, skip=self.on_bad_row == "skip")

    def check(self, count: int = 8) -> None:
        """Read the first ``count`` rows; with ``on_bad_row="skip"`` only a first batch of nothing but bad rows
        fails (naming the first problem)."""
        good = sum(
            1 for _ in zip(range(count), self._rows(0, skip=self.on_bad_row == "skip", count=False), strict=False)
        )
        if good == 0:
            next(self._rows(0, skip=False), None)  # raises on the first bad row
            raise DatasetError(f"{self.name}: no rows to read; give a file with at least one question")

    def _rows(self, start: int, *, skip: bool, count: bool = True) -> Iterator[DatasetRow]:
        for number, record in self.records.read(start, self._needed()):
            try:
                row = self._row(number, record)
            except _BadRow as bad:
                if skip:
                    self.skipped += count
                    continue
                raise self.error(number, bad.column, f"{bad.problem}; {bad.fix}, {_SKIP_HINT}") from None
            yield row

    def error(self, row: int | None, column: str | None, message: str) -> DatasetError:
        """A `DatasetError` naming this file, ``row`` and ``column``."""
        where = ", ".join([f"row {row}"] * (row is not None) + [f"column `{column}`"] * bool(column))
        return DatasetError(f"{self.name}: {where}: {message}" if where else f"{self.name}: {message}")

    def _needed(self) -> list[str]:
        """The file's columns this format reads (only those are loaded from Parquet and CSV)."""
        return [
            name for name in dict.fromkeys(key.split(".")[0] for key in self.schema.values()) if name in self.columns
        ]

    def _row(self, number: int, record: Any) -> DatasetRow:
        if isinstance(record, _BadRow):
            raise record
        question = _question(self.schema["question"], _get(record, self.schema["question"]))
        answers = _answers(self.schema["answers"], _get(record, self.schema["answers"]))
        document = self._document(record)
        identifier = _get(record, self.schema.get("id", ""))
        source = _get(record, self.schema.get("data_source", ""))
        evidence = _get(record, self.schema.get("evidence", ""))
        return DatasetRow(
            row=number,
            id=str(identifier) if identifier not in (None, "") else str(number),
            question=question,
            answers=answers,
            document=document,
            data_source=str(source) if source else None,
            evidence=tuple(str(e) for e in evidence) if isinstance(evidence, list | tuple) else (),
            format=self.format,
        )

    def _document(self, record: Any) -> str:
        column = self.schema["document"]
        text = _get(record, column)
        if text in (None, "") and (path_column := self.schema.get("path")) and _get(record, path_column):
            return _read_confined(path_column, str(_get(record, path_column)), self.root)
        if isinstance(text, list):
            raise _BadRow(column, "a list of paragraph indices, not text (MemAgent's over-1M test sets)",
                          "rebuild the text from hotpot_dev_distractor_v1.json first")  # fmt: skip
        if not isinstance(text, str) or not text.strip():
            fix = "give the document's text" + (f" or a `{self.schema['path']}`" if "path" in self.schema else "")
            raise _BadRow(column, "empty document", fix)
        return text


def _get(record: Any, key: str) -> Any:
    """``record[key]``, through dots into nested structs; None when absent."""
    value = record
    for part in key.split(".") if key else ():
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value if key else None


def _question(column: str, value: Any) -> str:
    if isinstance(value, list):  # a chat: the question is the last user turn (MemAgent's ``prompt``)
        turns = [turn.get("content") for turn in value if isinstance(turn, Mapping) and turn.get("role") == "user"]
        value = turns[-1] if turns else None
    if not isinstance(value, str) or not value.strip():
        raise _BadRow(column, "no question", "give each row a question")
    return value


def _answers(column: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) and value.lstrip().startswith("["):  # a list written into one CSV cell
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise _BadRow(column, f"{value[:40]!r} is not a JSON list", 'write the answers as ["a", "b"]') from None
    answers = [value] if isinstance(value, str | int | float) else list(value or [])
    kept = tuple(str(answer) for answer in answers if str(answer).strip())
    if not kept:
        raise _BadRow(column, "no answers", "give at least one gold answer")
    return kept


def _read_confined(column: str, relative: str, root: Path | None) -> str:
    """The text of ``relative`` under ``root``; a path leading out of it (``..``, absolute, a link) is bad."""
    if root is None:
        raise _BadRow(column, "a path row in an in-memory dataset", "pass root= (the folder paths are relative to)")
    base = root.resolve()
    target = (base / relative).resolve()
    if not target.is_relative_to(base):
        raise _BadRow(column, f"{relative!r} leads outside the data folder {base}", "keep documents under it")
    try:
        text = target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise _BadRow(column, f"cannot read {relative!r} ({error})", "point it at a UTF-8 text file") from None
    if not text.strip():
        raise _BadRow(column, f"{relative!r} is empty", "give a document with text")
    return text


def _detect(records: _Records, found: set[str], columns: Mapping[str, str] | None) -> tuple[str, dict[str, str]]:
    """The format of ``records`` (whose columns are ``found``) and where its fields are; `DatasetError` when none
    fits."""
    if columns:
        if unknown := sorted(set(columns) - set(FIELDS)):
            raise DatasetError(
                f"{records.name}: unknown field {', '.join(unknown)} in columns; use {', '.join(FIELDS)}"
            )
        schema = {**SCHEMAS["generic"], **columns}
        missing = [f"`{schema[f]}` ({f})" for f in ("question", "answers") if schema[f] not in found]
        if missing or not {schema["document"], schema["path"]} & found:
            missing += [] if {schema["document"], schema["path"]} & found else [f"`{schema['document']}` (document)"]
            raise DatasetError(f"{records.name}: no column {', '.join(missing)}; columns: {', '.join(sorted(found))}")
        return "generic", schema
    for name in ("memagent-train", "ruler", "memagent-eval", "longbench", "generic"):
        if _fits(name, found):
            return name, SCHEMAS[name]
    if "input" in found and "outputs" in found:  # RULER's own files keep the document inside `input`
        raise DatasetError(
            f"{records.name}: column `context`: missing; RULER's own files put the document inside `input`, "
            "MemAgent's split files have `context`: split the question from the document first"
        )
    raise DatasetError(
        f"{records.name}: unknown format (columns: {', '.join(sorted(found)) or 'none'}); expected question, answers "
        "and document (or path), MemAgent's, RULER's or LongBench's columns, or pass columns= (memagent: --columns)"
    )


def _fits(name: str, found: set[str]) -> bool:
    schema = SCHEMAS[name]
    if name == "generic":
        return {"question", "answers"} <= found and bool({"document", "path"} & found)
    required = {schema[f].split(".")[0] for f in ("question", "answers", "document")}
    if name == "memagent-eval":
        return required <= found and "num_docs" in found
    return required <= found


class _Records(Protocol):
    """Raw records of a source: ``(row number, dict or _BadRow)`` from a row on, and its column names."""

    name: str
    folder: Path | None
    num_rows: int | None

    def columns(self) -> set[str]: ...

    def read(self, start: int, needed: list[str]) -> Iterator[tuple[int, Any]]: ...


def _record_reader(source: Any) -> _Records:
    if hasattr(source, "column_names") and not isinstance(source, str | os.PathLike):
        return _InMemory(source)
    path = Path(source)
    if not path.is_file():
        raise DatasetError(f"{path}: no such data file; check the path")
    kind = _SUFFIXES.get(path.suffix.lower())
    if kind == "json":
        kind = "json-array" if _first_char(path) == "[" else "jsonl"
    readers = {"parquet": _Parquet, "csv": _Csv, "jsonl": _JsonLines, "json-array": _JsonArray}
    if kind is None:
        raise DatasetError(f"{path}: unknown file type {path.suffix!r}; use .parquet, .jsonl, .json or .csv")
    return readers[kind](path)


def _first_char(path: Path) -> str:
    with path.open("r", encoding="utf-8", errors="replace") as file:
        while chunk := file.read(4096):
            if stripped := chunk.lstrip():
                return stripped[0]
    return ""


class _FileRecords:
    """What every file reader shares: its path, name and folder."""

    num_rows: int | None = None

    def __init__(self, path: Path) -> None:
        self.path, self.name, self.folder = path, str(path), path.parent

    def error(self, row: int | None, problem: str) -> DatasetError:
        return DatasetError(f"{self.name}: {f'row {row}, ' if row is not None else ''}{problem}")


class _Parquet(_FileRecords):
    def __init__(self, path: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        super().__init__(path)
        try:
            # buffered reads, one thread: a row group's pages are decoded as they are needed (measured on a 1 GB
            # file of 64 MB row groups: ~200 MB peak above start, where the defaults reach ~300 MB)
            self.file = pq.ParquetFile(path, buffer_size=1 << 20, pre_buffer=False)
        except (pa.ArrowInvalid, OSError) as error:
            raise self.error(None, f"not a Parquet file, or a truncated one ({error}); write it again") from None
        self.num_rows = self.file.metadata.num_rows

    def columns(self) -> set[str]:
        return set(self.file.schema_arrow.names)

    def read(self, start: int, needed: list[str]) -> Iterator[tuple[int, Any]]:
        import pyarrow as pa

        first = 0
        for group in range(self.file.num_row_groups):
            size = self.file.metadata.row_group(group).num_rows
            if first + size <= start:  # a whole row group before the start: not read at all
                first += size
                continue
            try:
                batches = self.file.iter_batches(batch_size=8, row_groups=[group], columns=needed, use_threads=False)
                for batch in batches:
                    for record in batch.to_pylist():
                        if first >= start:
                            yield first, record
                        first += 1
            except (pa.ArrowInvalid, OSError) as error:
                raise self.error(first, f"cannot read row group {group} ({error}); the file is damaged") from None


class _Csv(_FileRecords):
    def columns(self) -> set[str]:
        with self.path.open(encoding="utf-8", newline="") as file:
            return set(next(csv.reader(file), []))

    def read(self, start: int, needed: list[str]) -> Iterator[tuple[int, Any]]:
        import pyarrow as pa
        import pyarrow.csv as pv

        strings = pv.ConvertOptions(column_types={name: pa.string() for name in needed}, include_columns=needed)
        try:
            reader = pv.open_csv(self.path, read_options=pv.ReadOptions(block_size=1 << 20), convert_options=strings)
            number = 0
            for batch in reader:
                for record in batch.to_pylist():
                    if number >= start:
                        yield number, record
                    number += 1
        except pa.ArrowInvalid as error:
            raise self.error(None, f"not a readable CSV file ({error})") from None


class _JsonLines(_FileRecords):
    def columns(self) -> set[str]:
        first = next((record for _, record in self.read(0, []) if isinstance(record, Mapping)), None)
        return set(first) if first is not None else set()

    def read(self, start: int, needed: list[str]) -> Iterator[tuple[int, Any]]:
        number = 0
        with self.path.open(encoding="utf-8") as file:
            for line_number, line in enumerate(file, start=1):
                if not line.strip():
                    continue
                if number >= start:
                    yield number, _json_object(line, line_number)
                number += 1


def _json_object(line: str, line_number: int) -> Any:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        return _BadRow("", f"line {line_number} is not JSON ({error.msg})", "fix or remove that line")
    if not isinstance(record, dict):
        return _BadRow("", f"line {line_number} is a {type(record).__name__}, not an object", "write one object a line")
    return record


class _JsonArray(_FileRecords):
    def columns(self) -> set[str]:
        first = next((record for _, record in self.read(0, []) if isinstance(record, Mapping)), None)
        return set(first) if first is not None else set()

    def read(self, start: int, needed: list[str]) -> Iterator[tuple[int, Any]]:
        import ijson

        number = 0
        with self.path.open("rb") as file:
            try:
                for record in ijson.items(file, "item", use_float=True):
                    if number >= start:
                        yield number, record if isinstance(record, dict) else _BadRow("", "not an object", "fix it")
                    number += 1
            except ijson.JSONError as error:
                raise self.error(number, f"invalid or truncated JSON ({error}); the file is damaged") from None


class _InMemory:
    folder = None

    def __init__(self, dataset: Any) -> None:
        self.dataset, self.name = dataset, f"<{type(dataset).__module__.split('.')[0]}.{type(dataset).__name__}>"
        self.num_rows = len(dataset) if hasattr(dataset, "__len__") else None

    def columns(self) -> set[str]:
        return set(self.dataset.column_names)

    def read(self, start: int, needed: list[str]) -> Iterator[tuple[int, Any]]:
        for number, record in enumerate(self.dataset):
            if number >= start:
                yield number, record

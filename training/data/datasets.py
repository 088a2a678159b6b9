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
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
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
_PEEK_ROWS = 100
"""How many rows of a JSON file are searched for the first object, whose keys are the file's columns."""
_MISSING: Any = object()
"""`_get`'s answer for a key a row does not have (told apart from null in messages)."""


class DatasetError(ConfigError):
    """Bad data, in one line: ``<file>: row <n>, column `<col>`: <problem>; <what to do>`` (row and column
    omitted when they do not apply)."""

    def __init__(self, message: str) -> None:
        super().__init__(re.sub(r"\s*\n\s*", " ", message.strip()))  # a parser's multi-line message, folded
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
        """Read the first ``count`` rows, good or bad: the first bad one raises, or with ``on_bad_row="skip"``
        only a first batch of nothing but bad rows does (naming the first problem)."""
        seen, good, first_bad = 0, 0, None
        for number, record in islice(self.records.read(0, self._needed()), count):
            seen += 1
            try:
                self._row(number, record)
                good += 1
            except _BadRow as bad:
                if self.on_bad_row == "error":
                    raise self._bad(number, bad) from None
                first_bad = first_bad or (number, bad)
        if first_bad and not good:
            number, bad = first_bad
            raise self.error(number, bad.column, f"{bad.problem}; {bad.fix} (none of the first {seen} rows is usable)")
        if not seen:
            raise DatasetError(f"{self.name}: no rows to read; give a file with at least one question")

    def _rows(self, start: int, *, skip: bool) -> Iterator[DatasetRow]:
        for number, record in self.records.read(start, self._needed()):
            try:
                row = self._row(number, record)
            except _BadRow as bad:
                if skip:
                    self.skipped += 1
                    continue
                raise self._bad(number, bad) from None
            yield row

    def _bad(self, number: int, bad: _BadRow) -> DatasetError:
        return self.error(number, bad.column, f"{bad.problem}; {bad.fix}, {_SKIP_HINT}")

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
        question = _question(self.schema["question"], _get(record, self.schema["question"], _MISSING))
        answers = _answers(self.schema["answers"], _get(record, self.schema["answers"], _MISSING))
        document = self._document(record)
        identifier = _get(record, self.schema.get("id", ""))
        source = _get(record, self.schema.get("data_source", ""))
        evidence = _strings(self.schema.get("evidence", ""), _get(record, self.schema.get("evidence", "")))
        return DatasetRow(
            row=number,
            id=str(identifier) if identifier not in (None, "") else str(number),
            question=question,
            answers=answers,
            document=document,
            data_source=str(source) if source else None,
            evidence=evidence,
            format=self.format,
        )

    def _document(self, record: Any) -> str:
        column = self.schema["document"]
        text = _get(record, column, _MISSING)
        if (text is _MISSING or text in (None, "")) and (path := self.schema.get("path")) and _get(record, path):
            return _read_confined(path, str(_get(record, path)), self.root)
        if isinstance(text, list) and all(isinstance(item, int) for item in text):
            raise _BadRow(column, "a list of paragraph indices, not text (MemAgent's over-1M test sets)",
                          "rebuild the text from hotpot_dev_distractor_v1.json first")  # fmt: skip
        if not isinstance(text, str) or not text.strip():
            fix = "give the document's text" + (f" or a `{self.schema['path']}`" if "path" in self.schema else "")
            raise _BadRow(column, "empty document" if isinstance(text, str) else f"no document ({_shown(text)})", fix)
        return text


def _get(record: Any, key: str, missing: Any = None) -> Any:
    """``record[key]``, through dots into nested structs; ``missing`` when the row has no such key."""
    value = record
    for part in key.split(".") if key else ():
        if not isinstance(value, Mapping) or part not in value:
            return missing
        value = value[part]
    return value if key else missing


def _shown(value: Any) -> str:
    """What a row holds where a value was needed, for a message."""
    if value is _MISSING:
        return "the key is missing"
    if value is None:
        return "null"
    if isinstance(value, str):
        return "an empty string" if not value else "only blanks"
    if isinstance(value, list | tuple):
        return "an empty list" if not value else "only blank items"
    return f"{type(value).__name__}, not text"


def _question(column: str, value: Any) -> str:
    if isinstance(value, list):  # a chat: the question is the last user turn (MemAgent's ``prompt``)
        turns = [turn.get("content") for turn in value if isinstance(turn, Mapping) and turn.get("role") == "user"]
        if not turns:
            raise _BadRow(column, "a chat without a user turn", "end the chat with the question as a user turn")
        value = turns[-1]
    if not isinstance(value, str) or not value.strip():
        raise _BadRow(column, f"no question ({_shown(value)})", "give each row its question as text")
    return value


def _answers(column: str, value: Any) -> tuple[str, ...]:
    answers = _strings(column, None if value is _MISSING else value)
    if not answers:
        raise _BadRow(column, f"no answers ({_shown(value)})", "give at least one gold answer")
    return answers


def _strings(column: str, value: Any) -> tuple[str, ...]:
    """A list of strings (the non-blank ones), one string or number, or a JSON list written into one CSV cell."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise _BadRow(column, f"{value[:40]!r} is not a JSON list", 'write the list as ["a", "b"]') from None
    if isinstance(value, Mapping):
        raise _BadRow(column, "an object, not a list of strings", 'write a list ["a", "b"] or one string')
    items = [value] if isinstance(value, str | int | float) else list(value or [])
    return tuple(str(item) for item in items if str(item).strip())


def _read_confined(column: str, relative: str, root: Path | None) -> str:
    """The text of ``relative`` under ``root``; a path leading out of it (``..``, absolute, a link) is bad."""
    if root is None:
        raise _BadRow(column, "a path row in an in-memory dataset", "pass root= (the folder paths are relative to)")
    base = root.resolve()
    try:
        target = (base / relative).resolve()
    except (OSError, ValueError) as error:  # a NUL byte, a link loop
        raise _BadRow(column, f"{relative!r} is not a usable path ({error})", "name a file in the folder") from None
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
            raise DatasetError(
                f"{records.name}: no column {', '.join(missing)}; columns: {', '.join(sorted(found))}; "
                "name the file's columns in columns= (memagent: --columns)"
            )
        return "generic", schema
    for name in ("memagent-train", "ruler", "memagent-eval", "longbench", "generic"):
        if _fits(name, found):
            schema = SCHEMAS[name]
            return name, {**schema, "id": "id"} if schema["id"] not in found and "id" in found else schema
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
    if path.is_dir():
        raise DatasetError(f"{path}: a folder, not a data file; give the file itself")
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
        try:
            with self.path.open(encoding="utf-8", newline="") as file:
                return set(next(csv.reader(file), []))
        except (UnicodeDecodeError, csv.Error) as error:
            raise self.error(None, f"not a UTF-8 CSV file ({error}); save it as UTF-8 CSV") from None

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
            fix = "save it as UTF-8 CSV, every row with the header's fields (quoted where they hold commas)"
            raise self.error(None, f"not a readable CSV file ({error}); {fix}") from None


def _first_columns(records: _FileRecords) -> set[str]:
    """The keys of the first object among a JSON file's first rows (the file's columns)."""
    for _, record in islice(records.read(0, []), _PEEK_ROWS):
        if isinstance(record, Mapping):
            return set(record)
    if next(records.read(0, []), None) is None:
        return set()
    raise records.error(None, f"no JSON object in its first {_PEEK_ROWS} rows; write one JSON object per line "
                              "(JSON Lines) or one JSON array of objects")  # fmt: skip


class _JsonLines(_FileRecords):
    def columns(self) -> set[str]:
        return _first_columns(self)

    def read(self, start: int, needed: list[str]) -> Iterator[tuple[int, Any]]:
        number = 0
        with self.path.open("rb") as file:
            for line_number, line in enumerate(file, start=1):
                if not line.strip():
                    continue
                if number >= start:
                    yield number, _json_object(line, line_number)
                number += 1


def _json_object(line: bytes, line_number: int) -> Any:
    try:
        record = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as error:
        return _BadRow("", f"line {line_number} is not UTF-8 ({error.reason})", "save the file as UTF-8")
    except json.JSONDecodeError as error:
        return _BadRow("", f"line {line_number} is not JSON ({error.msg})", "fix or remove that line")
    if not isinstance(record, dict):
        return _BadRow("", f"line {line_number} is a {type(record).__name__}, not an object", "write one object a line")
    return record


class _JsonArray(_FileRecords):
    def columns(self) -> set[str]:
        return _first_columns(self)

    def read(self, start: int, needed: list[str]) -> Iterator[tuple[int, Any]]:
        import ijson

        number = 0
        with self.path.open("rb") as file:
            try:
                for record in ijson.items(file, "item", use_float=True):
                    if number >= start:
                        yield number, record if isinstance(record, dict) else _not_object(record)
                    number += 1
            except ijson.JSONError as error:
                raise self.error(number, f"invalid or truncated JSON ({error}); the file is damaged") from None


def _not_object(item: Any) -> _BadRow:
    return _BadRow("", f"{type(item).__name__}, not an object", "make every item of the array a JSON object")


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

"""Training tasks from a data file: the rows of `datasets.open_dataset` as `Task`s, in file order or shuffled
through a seeded buffer, cut to ``max_document_tokens``, epoch after epoch.

A position is the number of rows taken from the (shuffled) stream, so a resumed run that takes from the same
position gets the same rows: the stream is replayed up to it (reading, not tokenizing, the rows it passes).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import count as counter
from typing import Literal

from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.training.data.datasets import DatasetError, DatasetRow, open_dataset
from memagent_graph.training.data.tasks import Task

DATA_SOURCE_REWARDS = {"hotpotqa": "memagent_verifier"}
"""The reward of a row by its ``data_source`` (MemAgent's column); other rows get the run's ``reward``."""


@dataclass(frozen=True)
class RowFilter:
    """What makes a row a task: its length in the policy's tokens and what to do with a longer one."""

    tokenizer: Tokenizer
    max_document_tokens: int | None = None
    truncation: Literal["center", "none"] = "none"
    on_bad_row: Literal["error", "skip"] = "error"


def center_truncate(text: str, *, tokenizer: Tokenizer, max_tokens: int) -> str:
    """``text`` cut to its first and last ``max_tokens / 2`` tokens (MemAgent's training truncation), or as it is
    when it fits."""
    ids = tokenizer.encode(text)
    if len(ids) <= max_tokens:
        return text
    head = max_tokens // 2
    return tokenizer.decode(ids[:head] + ids[len(ids) - (max_tokens - head) :])


def row_task(row: DatasetRow, rules: RowFilter, *, source: str) -> Task | None:
    """The task of ``row``: its document truncated as ``rules`` say; None for a row over the limit that
    ``rules`` skip (`DatasetError` when they do not)."""
    document, limit = row.document, rules.max_document_tokens
    if limit is not None and rules.truncation == "center":
        document = center_truncate(document, tokenizer=rules.tokenizer, max_tokens=limit)
    elif limit is not None and (length := rules.tokenizer.count(document)) > limit:
        if rules.on_bad_row == "skip":
            return None
        raise DatasetError(
            f"{source}: row {row.row}, column `document`: {length} tokens, over task.max_document_tokens {limit}; "
            "raise the limit, set task.truncation: center, or task.on_bad_row: skip"
        )
    reward = DATA_SOURCE_REWARDS.get(row.data_source or "")
    return Task(row.question, document, list(row.answers), row.evidence, reward=reward, row=row.row)


def buffer_shuffle(rows: Iterator[DatasetRow], *, size: int, rng: random.Random) -> Iterator[DatasetRow]:
    """``rows`` in a random order drawn through a buffer of ``size`` rows (what a stream too big to hold can
    do; Hugging Face's ``IterableDataset.shuffle`` does the same)."""
    buffer: list[DatasetRow] = []
    for row in rows:
        if len(buffer) < size:
            buffer.append(row)
            continue
        index = rng.randrange(size)
        yield buffer[index]
        buffer[index] = row
    rng.shuffle(buffer)
    yield from buffer


class DatasetTasks:
    """The training rows of one file as an endless stream of tasks (epoch after epoch), and the first rows of
    an evaluation file as the held-out tasks."""

    def __init__(
        self,
        dataset: str,
        *,
        eval_dataset: str,
        rules: RowFilter,
        columns: Mapping[str, str] | None = None,
        shuffle: bool = False,
        shuffle_buffer: int = 256,
        seed: int = 0,
    ) -> None:
        self.train = open_dataset(dataset, columns=columns, on_bad_row=rules.on_bad_row)
        self.held_out = open_dataset(eval_dataset, columns=columns, on_bad_row=rules.on_bad_row)
        self.rules, self.shuffle, self.shuffle_buffer, self.seed = rules, shuffle, shuffle_buffer, seed
        self._stream: Iterator[DatasetRow] | None = None
        self._position = -1
        self._held_out: list[Task] = []

    def check(self, count: int) -> None:
        """Read the first ``count`` rows of both files: a bad file fails here, before any worker starts."""
        for dataset in (self.train, self.held_out):
            dataset.check(count)

    def take(self, position: int, count: int) -> tuple[list[Task], int]:
        """``count`` tasks from stream position ``position``, and the position after them."""
        if position != self._position or self._stream is None:
            self._stream = self._rows()
            for _ in range(position):
                next(self._stream)
        tasks = []
        while len(tasks) < count:
            row, position = next(self._stream), position + 1
            if (task := row_task(row, self.rules, source=self.train.name)) is not None:
                tasks.append(task)
        self._position = position
        return tasks, position

    def held_out_tasks(self, count: int) -> list[Task]:
        """The first ``count`` tasks of the evaluation file, in file order (fewer when it has fewer)."""
        if len(self._held_out) < count:
            rows = self.held_out.rows()
            self._held_out = []
            for row in rows:
                if (task := row_task(row, self.rules, source=self.held_out.name)) is not None:
                    self._held_out.append(task)
                if len(self._held_out) == count:
                    break
        if not self._held_out:
            raise DatasetError(f"{self.held_out.name}: no usable rows for evaluation; check the file's rows")
        return self._held_out[:count]

    def warm_start_tasks(self, count: int) -> list[Task]:
        """The first ``count`` training tasks; each must name its evidence (the oracle teacher keeps it)."""
        tasks, _ = self.take(0, count)
        if missing := next((task for task in tasks if not task.evidence), None):
            raise DatasetError(
                f"{self.train.name}: row {missing.row}, column `evidence`: none, and warm_start's oracle teacher "
                "keeps a row's evidence sentences; add an `evidence` column or drop warm_start"
            )
        return tasks

    def _rows(self) -> Iterator[DatasetRow]:
        """The training rows, epoch after epoch (each epoch shuffled with its own seed when asked)."""
        for epoch in counter():
            rows = self.train.rows()
            if self.shuffle:
                rows = buffer_shuffle(rows, size=self.shuffle_buffer, rng=random.Random(f"{self.seed}/{epoch}"))
            empty = True
            for row in rows:
                empty = False
                yield row
            if empty:
                raise DatasetError(f"{self.train.name}: no usable rows to train on; check the file's rows")

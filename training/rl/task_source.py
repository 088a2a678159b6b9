"""Where a run's questions come from: generated task families (`TaskSettings.tasks`) or a data file
(`DatasetTasks`), behind one interface the trainer takes tasks from by position."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.training.data.tasks import Task

if TYPE_CHECKING:
    from memagent_graph.training.rl.config import TaskSettings

WARM_START_OFFSET = 10_000_000
"""Generated warm-start tasks start here, far past any RL step's tasks."""


class TaskSource(Protocol):
    """Training tasks by position, held-out tasks for evaluation, tasks for the warm start."""

    def check(self, count: int) -> None:
        """Fail on bad input before any worker starts."""
        ...

    def take(self, position: int, count: int) -> tuple[list[Task], int]:
        """``count`` training tasks from ``position``, and the position after them."""
        ...

    def held_out_tasks(self, count: int) -> list[Task]:
        """The evaluation tasks (never trained on)."""
        ...

    def warm_start_tasks(self, count: int) -> list[Task]:
        """The warm start's tasks."""
        ...


class GeneratedTasks:
    """The generated families of `TaskSettings`: task ``i`` of the stream is the same on every run."""

    def __init__(self, settings: TaskSettings, *, tokenizer: Tokenizer, chunk_tokens: int) -> None:
        self.settings, self.tokenizer, self.chunk_tokens = settings, tokenizer, chunk_tokens

    def check(self, count: int) -> None:
        """Generated tasks are valid by construction."""

    def take(self, position: int, count: int) -> tuple[list[Task], int]:
        """Tasks ``position .. position+count`` of the training stream."""
        tasks = self.settings.tasks(position, count, tokenizer=self.tokenizer, chunk_tokens=self.chunk_tokens)
        return tasks, position + count

    def held_out_tasks(self, count: int) -> list[Task]:
        """The first ``count`` tasks of the validation split (a generated family's evaluation phrasing; realtext's
        validation book, never its test book)."""
        return self.settings.tasks(0, count, tokenizer=self.tokenizer, chunk_tokens=self.chunk_tokens, evaluation=True)

    def warm_start_tasks(self, count: int) -> list[Task]:
        """Training-split tasks no RL step reaches."""
        return self.take(WARM_START_OFFSET, count)[0]


def task_source(settings: TaskSettings, *, tokenizer: Tokenizer, chunk_tokens: int) -> TaskSource:
    """The source ``settings`` describe: its data file when it names one, else its generated families."""
    if settings.dataset is None:
        return GeneratedTasks(settings, tokenizer=tokenizer, chunk_tokens=chunk_tokens)
    from memagent_graph.training.data.dataset_tasks import DatasetTasks, RowFilter

    rules = RowFilter(tokenizer, settings.max_document_tokens, settings.truncation, settings.on_bad_row)
    return DatasetTasks(
        settings.dataset,
        eval_dataset=str(settings.eval_dataset),
        rules=rules,
        columns=settings.columns,
        shuffle=settings.shuffle,
        shuffle_buffer=settings.shuffle_buffer,
        seed=settings.seed,
    )

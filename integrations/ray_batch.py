"""Many (document, question) pairs on Ray workers: ``memagent batch INPUT.jsonl OUTPUT.jsonl``.

Each INPUT line is ``{"id": optional, "document": path}`` or ``{"id": ..., "text": inline}`` plus
``"question"``; relative document paths are relative to INPUT's folder. Each pair has a key (its ``id``,
else a hash of document and question). Every result is one JSON line appended to OUTPUT (and flushed) as
soon as a worker returns it; a pair that fails gets a record with ``"error"`` instead, and the batch goes
on. A rerun skips the keys OUTPUT already holds a success for, so it resumes an interrupted batch and
retries the failures. Each Ray actor builds its own `MemAgent` once (and, on the embedded engine, loads
its own model). The API key travels to the workers but is never written to OUTPUT.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from memagent_graph.documents.sources import FileDocument, TextDocument
from memagent_graph.errors import EngineNotInstalledError, MemAgentError
from memagent_graph.integrations.model_options import ModelOptions
from memagent_graph.reading_options import ReadingOptions

if TYPE_CHECKING:
    from memagent_graph.agent import MemAgent
    from memagent_graph.config import MemAgentConfig

log = logging.getLogger(__name__)

Record = dict[str, Any]


class BatchError(MemAgentError, ValueError):
    """The batch cannot run at all (unreadable input, unwritable output, workers that cannot start)."""


@dataclass(frozen=True)
class BatchSettings(ModelOptions):
    """How every worker builds its MemAgent: the model (`ModelOptions`, with `choose_model`'s rule: no ``base_url``
    means the workers' ``MEMAGENT_BASE_URL``, else the embedded engine, one model per worker), and the reading
    options. `ModelOptions.with_env` completes the model from the driver's environment (workers lack it)."""

    reading: ReadingOptions = field(default_factory=ReadingOptions)

    @classmethod
    def from_cli_args(cls, args: object) -> Self:
        """The model and reading options an ``argparse`` namespace holds (``memagent batch``)."""
        return replace(super().from_cli_args(args), reading=ReadingOptions.from_cli_args(args))

    def config(self) -> MemAgentConfig:
        """The `MemAgentConfig` these settings describe (raises `ConfigError` when invalid)."""
        from memagent_graph.integrations.model_choice import reading_config

        return reading_config(self.reading, base_url=self.base_url)


@dataclass(frozen=True)
class BatchSummary:
    """What one run did: pairs answered, pairs skipped (already answered in OUTPUT), lines that failed."""

    done: int
    skipped: int
    failed: int


@dataclass(frozen=True)
class _Pair:
    header: Record  # key, id, line, document, question: the start of its OUTPUT record
    payload: Record  # what the worker needs: question and path or text


def run_batch(
    input_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
    *,
    settings: BatchSettings,
    workers: int = 2,
    address: str | None = None,
    progress: bool = True,
    on_record: Callable[[Record], None] | None = None,
) -> BatchSummary:
    """Answer every pair of ``input_path`` not yet answered in ``output_path``, appending one record per pair.

    Uses the running Ray session if there is one, else joins ``address``, else starts a local Ray with
    ``workers`` CPUs (and shuts down what it started). ``on_record`` sees each record once it is flushed.
    """
    if workers < 1:
        raise BatchError(f"workers must be at least 1 (got {workers})")
    settings.config()
    source, target = Path(input_path), Path(output_path)
    if source.exists() and target.exists() and source.samefile(target):
        raise BatchError(f"the output {target} is the input file; write the results to another file")
    items = list(_read_input(source))
    answered = _answered_keys(target)
    todo = [item for item in items if not (isinstance(item, _Pair) and item.header["key"] in answered)]
    skipped = len(items) - len(todo)
    if skipped:
        log.info("skipping %d pairs already answered in %s", skipped, target)
    counts = {"done": 0, "failed": 0}
    try:
        out = target.open("a", encoding="utf-8")
    except OSError as exc:
        raise BatchError(f"cannot write {target}: {exc.strerror or exc}") from None
    with out, _progress_bar(enabled=progress) as bar:
        task = bar.add_task("batch", total=len(todo), failed=0)

        def emit(record: Record) -> None:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            out.flush()
            counts["failed" if "error" in record else "done"] += 1
            if "error" in record:
                message = f"line {record['line']} ({record['key']}) failed: {record['error']}"
                if progress:  # printed above the live bar
                    bar.console.print(f"memagent: {message}", markup=False, highlight=False, soft_wrap=True)
                else:
                    log.warning(message)
            bar.update(task, advance=1, failed=counts["failed"])
            if on_record is not None:
                on_record(record)

        for item in todo:
            if not isinstance(item, _Pair):
                emit(item)
        pairs = [item for item in todo if isinstance(item, _Pair)]
        if pairs:
            _run_on_ray(pairs, settings, workers=workers, address=address, emit=emit)
    return BatchSummary(done=counts["done"], skipped=skipped, failed=counts["failed"])


def pair_key(*, document: str | None = None, text: str | None = None, question: str) -> str:
    """The key of a pair without an ``id``: a hash of its document path (or inline text) and question."""
    what = {"document": document} if text is None else {"text": text}
    blob = json.dumps({**what, "question": question}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _read_input(path: Path) -> Iterator[_Pair | Record]:
    """One `_Pair` per good line and one error record per bad one, in order (blank lines are ignored)."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise BatchError(f"input file not found: {path}") from None
    except OSError as exc:
        raise BatchError(f"cannot read {path}: {exc.strerror or exc}") from None
    first_line: dict[str, int] = {}
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            item = _parse_line(raw, number, path.absolute().parent)
            if isinstance(item, _Pair):
                key = item.header["key"]
                if key in first_line:
                    item = {**item.header, "error": f"duplicate key {key!r} (first on line {first_line[key]})"}
                first_line.setdefault(key, number)
            yield item


def _parse_line(raw: bytes, number: int, folder: Path) -> _Pair | Record:
    blank: Record = {"key": f"line-{number}", "id": None, "line": number, "document": None, "question": None}
    try:
        entry = json.loads(raw.decode("utf-8").lstrip("\ufeff"))
    except UnicodeDecodeError:
        return {**blank, "error": "the line is not valid UTF-8"}
    except json.JSONDecodeError as exc:
        return {**blank, "error": f"the line is not valid JSON ({exc.msg} at column {exc.colno})"}
    if not isinstance(entry, dict):
        return {**blank, "error": 'the line is not a JSON object like {"document": ..., "question": ...}'}
    ident, document, text, question = (entry.get(name) for name in ("id", "document", "text", "question"))
    header = {**blank, "id": ident, "document": document if isinstance(document, str) else None}
    if isinstance(question, str):
        header["question"] = question
    if ident is not None and (isinstance(ident, bool) or not isinstance(ident, str | int)):
        return {**header, "error": '"id" must be a string or an integer'}
    if ident is not None:
        header["key"] = str(ident)
    if not isinstance(question, str) or not question.strip():
        return {**header, "error": 'no "question" (a non-empty string)'}
    if (document is None) == (text is None):
        return {**header, "error": 'give either "document" (a file path) or "text" (the document itself)'}
    if not isinstance(document if text is None else text, str):
        return {**header, "error": f'"{"document" if text is None else "text"}" must be a string'}
    if ident is None:
        header["key"] = pair_key(document=document, text=text, question=question)
    payload = {"question": question, "text": text} if text is not None else {"question": question}
    if text is None:
        payload["path"] = str(folder / Path(document).expanduser())
    return _Pair(header=header, payload=payload)


def _answered_keys(path: Path) -> set[str]:
    """Keys that already have a success record in ``path``; an incomplete last line (a write cut short) is cut off."""
    keys: set[str] = set()
    try:
        handle = path.open("r+b")
    except FileNotFoundError:
        return keys
    except OSError as exc:
        raise BatchError(f"cannot open {path} to resume from it: {exc.strerror or exc}") from None
    with handle:
        offset = 0
        for raw in handle:
            if not raw.endswith(b"\n"):
                handle.truncate(offset)
                log.info("dropped the incomplete last line of %s (an interrupted write)", path)
                break
            offset += len(raw)
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if isinstance(record, dict) and "error" not in record and isinstance(record.get("key"), str):
                keys.add(record["key"])
    return keys


def _progress_bar(*, enabled: bool) -> Progress:
    return Progress(
        TextColumn("pairs"),
        MofNCompleteColumn(),
        BarColumn(),
        TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not enabled,
    )


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EngineNotInstalledError(
            "memagent batch needs Ray: pip install 'memagent-graph[batch]' (or pip install ray)"
        ) from None
    return ray


def _run_on_ray(
    pairs: list[_Pair], settings: BatchSettings, *, workers: int, address: str | None, emit: Callable[[Record], None]
) -> None:
    """Keep one pair in flight per actor and emit each record as `ray.wait` returns it."""
    ray = _import_ray()
    started_ray = not ray.is_initialized()
    if started_ray:
        _start_ray(ray, workers=workers, address=address)
    worker_class = ray.remote(num_cpus=1)(_PairWorker)
    actors: list[Any] = []
    try:
        actors += [worker_class.remote(settings) for _ in range(min(workers, len(pairs)))]
        _check_workers(ray, actors)
        queue, in_flight = deque(pairs), {}

        def submit(actor: Any) -> None:
            if queue:
                pair = queue.popleft()
                in_flight[actor.answer.remote(pair.payload)] = (actor, pair)

        for actor in actors:
            submit(actor)
        while in_flight:
            [ref], _ = ray.wait(list(in_flight), num_returns=1)
            actor, pair = in_flight.pop(ref)
            try:
                outcome = ray.get(ref)
            except ray.exceptions.RayActorError as exc:
                outcome = {"error": f"the worker died while answering this pair ({_first_line(exc)}); rerun to retry"}
                ray.kill(actor)  # frees its CPU if it is only unreachable
                actor = worker_class.remote(settings)
                actors.append(actor)
            except ray.exceptions.RayError as exc:
                outcome = {"error": _first_line(exc)}
            emit({**pair.header, **outcome})
            submit(actor)
    finally:
        for actor in actors:
            ray.kill(actor)
        if started_ray:
            ray.shutdown()


def _start_ray(ray: Any, *, workers: int, address: str | None) -> None:
    quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
    try:
        if address is None:
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a private local cluster needs no token
            ray.init(num_cpus=workers, include_dashboard=False, **quiet)
        else:
            ray.init(address=address, **quiet)
    except Exception as exc:
        where = f"join the Ray cluster at {address}" if address else "start a local Ray"
        raise BatchError(f"cannot {where}: {_first_line(exc)}") from exc


def _check_workers(ray: Any, actors: list[Any]) -> None:
    """Wait until every actor has built its agent; a setup failure stops the batch with one message."""
    try:
        reports = ray.get([actor.ready.remote() for actor in actors])
    except ray.exceptions.RayError as exc:
        raise BatchError(f"the Ray workers could not start: {_first_line(exc)}") from exc
    if errors := [report["error"] for report in reports if "error" in report]:
        raise BatchError(f"the workers could not build the agent: {errors[0]}")
    log.info("workers: %d × %s", len(actors), reports[0]["model"])
    from memagent_graph.documents.tokenization import ApproximateTokenizer

    if reports[0]["tokenizer"] == ApproximateTokenizer.name:
        log.warning("no tokenizer for the served model: budgets are approximate; pass --tokenizer PATH for exact ones")


class _PairWorker:
    """The Ray actor: builds one MemAgent from `BatchSettings`, then answers pairs; it never raises."""

    def __init__(self, settings: BatchSettings) -> None:
        self._agent: MemAgent | None = None
        try:
            self._agent, self._model = _build_agent(settings)
            self._error = None
        except Exception as exc:
            self._error = _describe(exc)

    def ready(self) -> Record:
        """The model and tokenizer in use, or ``{"error": ...}`` when the agent could not be built."""
        if self._agent is None:
            return {"error": self._error}
        return {"model": self._model, "tokenizer": self._agent.tokenizer.name}

    def answer(self, payload: Record) -> Record:
        """`MemAgentResult.to_json_dict()` for one pair, or ``{"error": ...}``."""
        if self._agent is None:
            return {"error": self._error}
        try:
            if payload.get("text") is not None:
                document = TextDocument(payload["text"])
            else:
                document = FileDocument(payload["path"])
            return self._agent.invoke(payload["question"], document).to_json_dict()  # the agent releases one-offs
        except Exception as exc:
            return {"error": _describe(exc)}


def _build_agent(settings: BatchSettings) -> tuple[MemAgent, str]:
    """The agent ``memagent ask`` would build with these settings, and a description of its model."""
    from memagent_graph.agent import MemAgent

    choice = settings.choose()
    return MemAgent(choice.model, config=settings.config(), tokenizer=choice.tokenizer), choice.description


def _describe(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, MemAgentError) else f"{type(exc).__name__}: {exc}"


def _first_line(exc: BaseException) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)

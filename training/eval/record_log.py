"""The answers of an evaluation as they come: one JSON line each, so a stopped run resumes where it was."""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, Generic, TypeVar

from memagent_graph.config import MemAgentConfig
from memagent_graph.errors import ConfigError

R = TypeVar("R")

READING_CODE = ("memagent_graph.nodes", "memagent_graph.training.data", "memagent_graph.integrations.models")
"""The packages whose code decides an evaluation's answers: the reading policies and answer steps, the tasks,
the models' scoring (`reading_code_digest`)."""


def reading_code_digest(packages: tuple[str, ...] = READING_CODE) -> str:
    """A digest of ``packages``' Python sources, kept in an evaluation's settings so that ``--resume`` refuses to
    add answers of changed code to a folder's older ones (a changed answer step is no setting)."""
    digest = hashlib.sha256()
    for name in packages:
        folder = Path(next(iter(importlib.import_module(name).__path__)))
        for path in sorted(folder.rglob("*.py")):
            digest.update(f"{name}/{path.relative_to(folder).as_posix()}".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class RecordLog(Generic[R]):
    """``records.jsonl`` in an output folder: one line per answer (a ``record`` dataclass), flushed at once;
    ``--resume`` reads it back, refusing a folder run with other settings except a larger value of a
    ``growable`` one (such as ``samples``, where document i is the same for every count)."""

    def __init__(
        self,
        folder: str | Path,
        *,
        settings: dict[str, Any],
        resume: bool,
        record: type[R],
        growable: tuple[str, ...] = (),
    ) -> None:
        self.record = record
        self.folder = Path(folder)
        self.path, settings_path = self.folder / "records.jsonl", self.folder / "settings.json"
        if resume:
            if not settings_path.is_file():
                raise ConfigError(f"nothing to resume in {self.folder}: no settings.json (run without --resume)")
            saved = json.loads(settings_path.read_text(encoding="utf-8"))
            if changed := _changed(saved, settings, growable=growable):
                code = " (the reading code has changed since that run)" if "reading_code" in changed else ""
                raise ConfigError(
                    f"--resume: {self.folder} was run with other settings ({', '.join(changed)}){code}; "
                    "run them again as they were, or use another --output-dir"
                )
        elif self.path.is_file() and self.path.stat().st_size:
            raise ConfigError(f"{self.path} holds answers already: add --resume, or use another --output-dir")
        self.folder.mkdir(parents=True, exist_ok=True)
        settings_path.write_text(json.dumps(settings, indent=1) + "\n", encoding="utf-8")
        kept = (
            [json.dumps(record) + "\n" for record in _json_lines(self.path)] if resume and self.path.is_file() else []
        )
        self.path.write_text("".join(kept), encoding="utf-8")  # a cut last line (a killed run) goes

    def records(self) -> list[R]:
        """The answers written so far (a cut last line, from a killed run, is dropped)."""
        if not self.path.is_file():
            return []
        return [self.record(**record) for record in _json_lines(self.path)]

    def append(self, record: R) -> None:
        """Write one answer and flush it."""
        with self.path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(asdict(record)) + "\n")


def _changed(saved: dict[str, Any], settings: dict[str, Any], *, growable: tuple[str, ...]) -> list[str]:
    """The settings that differ; a reading option an older run's file lacks counts as its default (an option
    added since, such as ``segments``, does not block resuming a run made before it), and a ``growable`` one
    may only grow."""
    reading, before = settings.get("reading"), saved.get("reading")
    if isinstance(reading, dict) and isinstance(before, dict):
        defaults = MemAgentConfig().model_dump(mode="json")
        saved = {**saved, "reading": {**{k: defaults[k] for k in reading if k in defaults}, **before}}
    grown = {key for key in growable if isinstance(saved.get(key), int) and settings.get(key, -1) >= saved[key]}
    return sorted(key for key in {*saved, *settings} - grown if saved.get(key) != settings.get(key))


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            continue  # the line a killed run was writing

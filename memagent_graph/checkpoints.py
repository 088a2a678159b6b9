"""Checkpoint files: a LangGraph `SqliteSaver` on a file only its owner can read (memories quote the document)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver

from memagent_graph.errors import ConfigError


@contextlib.contextmanager
def open_checkpoint_db(path: str | os.PathLike[str], *, fsync: bool = False) -> Iterator[SqliteSaver]:
    """Open (creating it with mode 0600) a SQLite checkpoint file; SQLite gives its WAL files the same mode.

    Each saved step survives the process being killed at any moment (SIGKILL, out of memory): it is in SQLite's
    write-ahead log before the next step starts. ``fsync=True`` also makes it survive a power cut, at the price of
    a disk flush per step (SQLite's ``synchronous=FULL``; the default is ``NORMAL``, which flushes at WAL
    checkpoints only)."""
    file = Path(path).expanduser()
    if file.is_dir():
        raise ConfigError(f"checkpoint file {file} is a directory; pass a file path such as {file / 'memagent.db'}")
    if not file.parent.is_dir():
        raise ConfigError(f"cannot create checkpoint file {file}: folder {file.parent} does not exist")
    try:
        os.close(os.open(file, os.O_RDWR | os.O_CREAT, 0o600))
        os.chmod(file, 0o600)  # also an existing file: memories quote the document
    except OSError as exc:
        raise ConfigError(f"cannot open checkpoint file {file}: {exc.strerror}") from None
    connection = sqlite3.connect(str(file), check_same_thread=False)
    try:
        saver = SqliteSaver(connection)
        try:
            saver.setup()  # now rather than at the first chunk: a file that is not a database fails here
        except sqlite3.DatabaseError as exc:
            raise ConfigError(
                f"{file} is not a checkpoint file ({exc}); pass a new path or one written by memagent"
            ) from None
        connection.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")  # setup() turned WAL on
        yield saver
    finally:
        connection.close()

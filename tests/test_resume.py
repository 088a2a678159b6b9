"""Resume after a crash: the CLI killed (SIGKILL) or stopped (SIGTERM) at random chunks continues where it was."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys

import pytest

from memagent_graph import HuggingFaceTokenizer, TextDocument
from memagent_graph.documents.chunking import chunk_document
from memagent_graph.documents.haystack import needle_document
from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

pytestmark = pytest.mark.slow
BUDGET = ["--chunk-tokens", "300", "--memory-tokens", "80", "--answer-tokens", "30", "--temperature", "0"]


@pytest.fixture(scope="module")
def files(tokenizer, tmp_path_factory):
    folder = tmp_path_factory.mktemp("resume")
    tokenizer.save(folder / "tokenizer.json")
    task = needle_document(tokens=12 * 300 - 150, tokenizer=tokenizer, seed=5, depth=0.0)
    (folder / "doc.txt").write_text(task.text)
    (folder / "other.txt").write_text(task.text.replace("magic", "secret", 1))
    saved = HuggingFaceTokenizer(folder / "tokenizer.json")
    chunks = chunk_document(TextDocument(task.text), saved, chunk_tokens=300).num_chunks
    assert chunks >= 8
    return folder, task, chunks


class Reader:
    """The CLI reading one document through a simulated server, with a checkpoint file."""

    def __init__(self, folder, task, db, *, extra=()):
        self.folder, self.task, self.db, self.extra = folder, task, db, list(extra)
        self.process: subprocess.Popen | None = None

    def run(self, *, document="doc.txt", on_completion=None, extra=()):
        with SimulatedOpenAIServer(on_completion=on_completion) as server:
            command = [
                sys.executable, "-m", "memagent_graph.integrations.cli",
"ask", str(self.folder / document), self.task.question,
                "--base-url", server.base_url, "--model", server.model_name,
                "--tokenizer", str(self.folder / "tokenizer.json"), *BUDGET, "--json", "--quiet",
                "--checkpoint-db", str(self.db), *self.extra, *extra,
            ]  # fmt: skip
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            stdout, stderr = self.process.communicate(timeout=120)
            return self.process.returncode, stdout, stderr, len(server.chat_requests())

    def signal_at(self, index, signum):
        def hook(request_index):
            if request_index == index:
                os.kill(self.process.pid, signum)

        return hook


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_killed_read_resumes_without_resending_completed_chunks(files, tmp_path, seed):
    folder, task, chunks = files
    reader = Reader(folder, task, tmp_path / "run.db")
    kill_at = random.Random(seed).randrange(1, chunks)  # the model call for chunk kill_at+1 is in flight
    code, _, _, _ = reader.run(on_completion=reader.signal_at(kill_at, signal.SIGKILL))
    assert code == -signal.SIGKILL
    code, stdout, stderr, sent = reader.run()
    assert code == 0, stderr
    result = json.loads(stdout)
    assert result["num_chunks"] == chunks
    assert f"resuming from chunk {kill_at + 1}/{chunks}" in stderr
    assert sent == chunks - kill_at + 1  # the interrupted chunk, the rest, the answer; nothing done is re-sent
    assert result["answer"] == task.answer


def test_an_uninterrupted_and_a_resumed_read_give_the_same_answer_and_memory(files, tmp_path):
    folder, task, chunks = files
    clean = json.loads(Reader(folder, task, tmp_path / "clean.db").run()[1])
    reader = Reader(folder, task, tmp_path / "run.db")
    reader.run(on_completion=reader.signal_at(6, signal.SIGKILL))
    resumed = json.loads(reader.run()[1])
    assert (resumed["answer"], resumed["memory"], resumed["usage"]["calls"]) == (
        clean["answer"],
        clean["memory"],
        clean["usage"]["calls"],
    )


def test_sigterm_stops_after_the_current_chunk_and_says_how_to_resume(files, tmp_path):
    folder, task, chunks = files
    reader = Reader(folder, task, tmp_path / "run.db")
    code, _, stderr, sent = reader.run(on_completion=reader.signal_at(4, signal.SIGTERM))
    assert code == 130
    assert f"stopped after chunk 5/{chunks}; run the same command again to resume" in stderr
    assert sent == 5  # the chunk in flight was finished, nothing more was started
    assert len(list((tmp_path / "run.db-chunks").glob("*.chunks"))) == 1  # the resumed run does not re-chunk
    code, stdout, stderr, sent = reader.run()
    assert code == 0 and f"resuming from chunk 6/{chunks}" in stderr
    assert sent == chunks - 5 + 1
    assert json.loads(stdout)["answer"] == task.answer


def test_resuming_onto_another_document_is_refused(files, tmp_path):
    folder, task, chunks = files
    reader = Reader(folder, task, tmp_path / "run.db")
    reader.run(on_completion=reader.signal_at(3, signal.SIGKILL))
    code, _, stderr, sent = reader.run(document="other.txt")
    assert code == 1 and sent == 0
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("memagent: error: ") and "holds an unfinished read of a different document" in last
    assert "--fresh" in last and "Traceback" not in stderr and "resuming" not in stderr


def test_resuming_with_other_settings_is_refused(files, tmp_path):
    folder, task, chunks = files
    reader = Reader(folder, task, tmp_path / "run.db")
    reader.run(on_completion=reader.signal_at(3, signal.SIGKILL))
    code, _, stderr, sent = reader.run(extra=["--answer-tokens", "31"])
    assert code == 1 and sent == 0
    assert "different settings" in stderr


def test_fresh_discards_the_saved_read(files, tmp_path):
    folder, task, chunks = files
    reader = Reader(folder, task, tmp_path / "run.db")
    reader.run(on_completion=reader.signal_at(3, signal.SIGKILL))
    code, _, stderr, sent = reader.run(document="other.txt", extra=["--fresh"])
    assert code == 0 and "discarded the saved read" in stderr
    assert sent == chunks + 1


def test_checkpoint_files_are_readable_by_their_owner_only(files, tmp_path):
    folder, task, chunks = files
    Reader(folder, task, tmp_path / "run.db").run()
    written = [p for p in tmp_path.iterdir() if p.name.startswith("run.db") and p.is_file()]
    assert written and {stat.S_IMODE(p.stat().st_mode) for p in written} == {0o600}
    [index_folder] = [p for p in tmp_path.iterdir() if p.is_dir()]  # the chunk index, next to the checkpoint
    assert stat.S_IMODE(index_folder.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in index_folder.iterdir()} == {0o600}

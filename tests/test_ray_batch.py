"""``memagent batch`` / `run_batch`: Ray workers against a loopback OpenAI-compatible server.

One Ray session serves the in-process tests (started in a private temp dir, so the test can check that
nothing of it is left); the CLI test starts its own local Ray in another private temp dir.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from memagent_graph.documents.haystack import needle_document
from memagent_graph.errors import ConfigError
from memagent_graph.integrations.ray_batch import BatchError, BatchSettings, BatchSummary, run_batch
from memagent_graph.prompts import PromptSet
from memagent_graph.reading_options import ReadingOptions
from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.ray]

SECRET = "sk-test-secret-key"
SMALL = {"chunk_tokens": 300, "memory_tokens": 100, "answer_tokens": 30}


def ray_processes(temp_dir: str) -> list[int]:
    """Pids of the Ray processes of the cluster whose temp dir is ``temp_dir``."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and temp_dir.encode() in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def wait_until_gone(temp_dir: str, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := ray_processes(temp_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.fixture(scope="module")
def ray_session():
    temp_dir = tempfile.mkdtemp(prefix="rbt", dir="/tmp")  # short: Ray's socket paths live under it
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_AUTH_MODE", "disabled")
        patch.setenv("RAY_TMPDIR", temp_dir)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            yield
        finally:
            ray.shutdown()
    assert wait_until_gone(temp_dir) == []
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def server(tokenizer):
    with SimulatedOpenAIServer(tokenizer=tokenizer) as running:
        yield running


@pytest.fixture(scope="module")
def jobs(tokenizer, tmp_path_factory):
    """Six needle documents; ``good.jsonl`` asks one question each, ``all.jsonl`` adds three bad lines."""
    folder = tmp_path_factory.mktemp("jobs")
    lines, answers = [], {}
    for seed in range(6):
        task = needle_document(tokens=1500, tokenizer=tokenizer, seed=seed, depth=0.0)
        (folder / f"doc{seed}.txt").write_text(task.text, encoding="utf-8")
        lines.append(json.dumps({"id": f"pair-{seed}", "document": f"doc{seed}.txt", "question": task.question}))
        answers[f"pair-{seed}"] = task.answer
    (folder / "good.jsonl").write_text("\n".join(lines) + "\n")
    bad = ['{"id": "broken", "document": ', json.dumps({"document": "nope.txt", "question": "Who?"}), '{"id": "q"}']
    (folder / "all.jsonl").write_text("\n".join(lines[:3] + bad + lines[3:]) + "\n\n")
    return folder, answers


def settings(server) -> BatchSettings:
    return BatchSettings(base_url=server.base_url, api_key=SECRET, reading=ReadingOptions(**SMALL))


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def first_run(ray_session, server, jobs, tmp_path_factory):
    """Run ``all.jsonl`` once; check at every record that the file already holds it (written and flushed)."""
    folder, _ = jobs
    output = tmp_path_factory.mktemp("out") / "results.jsonl"
    seen = []

    def on_record(record):
        seen.append(record)
        on_disk = read_records(output)
        assert len(on_disk) == len(seen) and on_disk[-1] == record

    summary = run_batch(folder / "all.jsonl", output, settings=settings(server), progress=False, on_record=on_record)
    return output, summary, seen


def test_one_record_per_line_as_each_finishes(first_run, jobs):
    output, summary, seen = first_run
    _, answers = jobs
    assert summary == BatchSummary(done=6, skipped=0, failed=3)
    records = read_records(output)
    assert records == seen
    successes = {r["key"]: r for r in records if "error" not in r}
    assert {key: r["answer"] for key, r in successes.items()} == answers
    one = successes["pair-0"]
    assert {"key", "id", "line", "document", "question", "answer", "memory", "num_chunks", "steps", "usage"} <= set(one)
    assert (one["id"], one["line"], one["document"]) == ("pair-0", 1, "doc0.txt")
    assert one["num_chunks"] >= 5 and len(one["steps"]) == one["num_chunks"] + 1
    assert SECRET not in output.read_text()


def test_bad_lines_get_error_records_and_the_rest_goes_on(first_run):
    output, _, _ = first_run
    errors = {r["line"]: r for r in read_records(output) if "error" in r}
    assert sorted(errors) == [4, 5, 6]
    assert "not valid JSON" in errors[4]["error"] and errors[4]["key"] == "line-4"
    assert "document not found" in errors[5]["error"] and errors[5]["document"] == "nope.txt"
    assert len(errors[5]["key"]) == 16  # no id: a hash of document and question
    assert "question" in errors[6]["error"] and errors[6]["key"] == "q"


def test_rerun_skips_answered_pairs_without_calling_the_server(first_run, jobs, server, tmp_path):
    output, _, _ = first_run
    folder, _ = jobs
    copy = tmp_path / "results.jsonl"
    shutil.copy(output, copy)
    before = len(server.requests)
    summary = run_batch(folder / "good.jsonl", copy, settings=settings(server), progress=False)
    assert summary == BatchSummary(done=0, skipped=6, failed=0)
    assert len(server.requests) == before
    assert copy.read_bytes() == output.read_bytes()


def test_resume_after_a_write_cut_short(first_run, jobs, server, tmp_path):
    output, _, _ = first_run
    folder, answers = jobs
    successes = [line for line in output.read_text().splitlines() if '"error"' not in line]
    killed = tmp_path / "results.jsonl"
    killed.write_text("\n".join(successes[:5]) + "\n" + successes[5][: len(successes[5]) // 2])
    summary = run_batch(folder / "good.jsonl", killed, settings=settings(server), progress=False)
    assert summary == BatchSummary(done=1, skipped=5, failed=0)
    records = read_records(killed)  # every line is whole again
    assert len(records) == 6 and {r["key"]: r["answer"] for r in records} == answers


class KillingServer(SimulatedOpenAIServer):
    """Kills the Ray worker process that sends a prompt containing ``KILL-THE-WORKER``."""

    def _handle(self, handler, method, body):
        if "KILL-THE-WORKER" in json.dumps(body.get("messages", [])):
            for entry in Path("/proc").iterdir():
                try:
                    if entry.name.isdigit() and (entry / "cmdline").read_bytes().startswith(b"ray::_PairWorker"):
                        os.kill(int(entry.name), signal.SIGKILL)
                except OSError:
                    continue
            return None  # no reply: the client is gone
        return super()._handle(handler, method, body)


def test_a_worker_that_dies_fails_only_its_pair(ray_session, tokenizer, tmp_path):
    texts = [needle_document(tokens=600, tokenizer=tokenizer, seed=seed, depth=0.0) for seed in range(3)]
    lines = [{"id": f"t{i}", "text": task.text, "question": task.question} for i, task in enumerate(texts)]
    lines[1]["text"] = "KILL-THE-WORKER\n\n" + lines[1]["text"]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with KillingServer(tokenizer=tokenizer) as killer:
        summary = run_batch(source, tmp_path / "out.jsonl", settings=settings(killer), workers=1, progress=False)
    assert summary == BatchSummary(done=2, skipped=0, failed=1)
    records = {r["key"]: r for r in read_records(tmp_path / "out.jsonl")}
    assert "worker died" in records["t1"]["error"]
    assert records["t0"]["answer"] == texts[0].answer and records["t2"]["answer"] == texts[2].answer
    assert records["t0"]["document"] is None  # inline text is not echoed


def memagent(*args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMAGENT_", "OPENAI_", "RAY_"))}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "memagent_graph.integrations.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_cli_end_to_end(server, jobs):
    """Options reach the workers: ``--prompts verbatim`` (once ignored by batch) shapes every update call."""
    folder, answers = jobs
    verbatim = PromptSet.verbatim().update.split("<question>")[0].strip()
    seen_before = len(server.chat_requests())
    source, output = folder / "cli.jsonl", folder / "cli-out.jsonl"
    source.write_text("".join((folder / "good.jsonl").read_text().splitlines(keepends=True)[:2]) + "not json\n")
    budget = [f"--{key.replace('_', '-')}={value}" for key, value in SMALL.items()]
    temp_dir = tempfile.mkdtemp(prefix="rbc", dir="/tmp")
    try:
        result = memagent(
            "batch", str(source), str(output), "--base-url", server.base_url, "--api-key", SECRET, *budget,
            "--prompts", "verbatim",
            env_extra={"RAY_TMPDIR": temp_dir},
        )  # fmt: skip
        assert wait_until_gone(temp_dir) == []  # the CLI shut its local Ray down
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "memagent: batch: 2 done, 0 skipped, 1 failed" in result.stderr.splitlines()
    assert "line 3 (line-3) failed: the line is not valid JSON" in result.stderr
    expected = {"pair-0": answers["pair-0"], "pair-1": answers["pair-1"], "line-3": None}
    assert {r["key"]: r.get("answer") for r in read_records(output)} == expected
    assert SECRET not in output.read_text()
    prompts = [r["messages"][-1]["content"] for r in server.chat_requests()[seen_before:]]
    updates = [p for p in prompts if "<section>" in p]
    assert updates and all(p.startswith(verbatim) for p in updates)


def test_cli_error_is_one_line(tmp_path):
    result = memagent("batch", str(tmp_path / "nope.jsonl"), str(tmp_path / "out.jsonl"), "--base-url", "http://x/v1")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1
    assert lines == [f"memagent: error: input file not found: {tmp_path / 'nope.jsonl'}"], result.stderr


def test_unusable_output_stops_before_any_work(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "x", "question": "q"}\n')
    options = {"settings": BatchSettings(base_url="http://127.0.0.1:9/v1"), "progress": False}
    with pytest.raises(BatchError, match="cannot write .*nope/out.jsonl: No such file or directory"):
        run_batch(source, tmp_path / "nope" / "out.jsonl", **options)
    with pytest.raises(BatchError, match="is the input file"):
        run_batch(source, source, **options)
    with pytest.raises(ConfigError, match="memory_tokens"):
        run_batch(
            source,
            tmp_path / "out.jsonl",
            **{**options, "settings": BatchSettings(reading=ReadingOptions(chunk_tokens=10))},
        )

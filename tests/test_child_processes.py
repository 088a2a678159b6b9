"""No orphans: a server (or local Ray cluster) ends when the process that started it dies, even by SIGKILL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from memagent_graph.integrations.child_processes import end_with_parent

pytestmark = pytest.mark.integration

# a "server" that spawns a worker of its own, as vLLM's API server spawns its engine
SERVER = (
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"
)


def _run_parent(script: str, *, timeout_s: float) -> tuple[subprocess.Popen[str], dict]:
    """Start ``script`` in a Python subprocess; wait for the JSON line it prints once its children are up."""
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE, text=True)
    started = time.monotonic()
    line = parent.stdout.readline()
    assert line, f"the parent exited with {parent.wait()} before reporting its children"
    assert time.monotonic() - started < timeout_s
    return parent, json.loads(line)


def _descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def _wait_gone(processes: list[psutil.Process], *, timeout_s: float) -> list[psutil.Process]:
    """The processes still running after ``timeout_s`` (psutil tells a reused pid from the original)."""
    _, alive = psutil.wait_procs(processes, timeout=timeout_s)
    return [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _kill(parent: subprocess.Popen[str]) -> None:
    parent.send_signal(signal.SIGKILL)
    parent.wait()


def test_a_server_and_its_workers_end_when_the_parent_is_killed():
    parent, report = _run_parent(
        f"""
        import json, subprocess, sys, time
        from memagent_graph.integrations.child_processes import end_with_parent
        server = subprocess.Popen([sys.executable, "-c", {SERVER!r}], start_new_session=True)
        end_with_parent(server, grace_s=2)
        time.sleep(1)
        print(json.dumps({{"server": server.pid}}), flush=True)
        time.sleep(600)
        """,
        timeout_s=30,
    )
    server = psutil.Process(report["server"])
    group = [server, *server.children(recursive=True)]
    assert len(group) == 2  # the server and its worker
    _kill(parent)
    assert _wait_gone(group, timeout_s=15) == []


def test_closing_the_watchdog_ends_the_group_and_the_watchdog():
    server = subprocess.Popen([sys.executable, "-c", SERVER], start_new_session=True)
    time.sleep(1)
    group = [psutil.Process(server.pid), *psutil.Process(server.pid).children(recursive=True)]
    watchdog = end_with_parent(server, grace_s=60)
    started = time.monotonic()
    watchdog.close()
    # the server died at SIGTERM: its zombie (ours to reap) does not hold the watchdog for the grace period
    assert time.monotonic() - started < 30
    assert not psutil.pid_exists(watchdog.pid)
    server.wait(timeout=5)
    assert _wait_gone(group, timeout_s=5) == []


@pytest.fixture(scope="session")
def killed_ray_driver() -> dict[str, list[psutil.Process]]:
    """A driver that started a local Ray cluster (as the trainer and the CLI start it), killed by SIGKILL: the
    cluster's processes by name, as they were. Session-scoped: Ray's agents take a minute to end, and the rest
    of the run goes on meanwhile (the last look is a `last` test)."""
    parent, report = _run_parent(
        """
        import json, os, time
        os.environ["RAY_AUTH_MODE"] = "disabled"
        import ray
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
        @ray.remote(num_cpus=1)
        class Worker:
            def pid(self):
                return os.getpid()
        worker = Worker.remote()
        print(json.dumps({"actor": ray.get(worker.pid.remote())}), flush=True)
        time.sleep(600)
        """,
        timeout_s=120,
    )
    cluster: dict[str, list[psutil.Process]] = {}
    for process in _descendants(parent.pid):
        name = "actor" if process.pid == report["actor"] else process.name()
        cluster.setdefault(name, []).append(process)
    _kill(parent)
    return cluster


@pytest.mark.slow
@pytest.mark.ray
def test_a_local_ray_clusters_raylet_gcs_and_actors_end_at_once_with_its_driver(killed_ray_driver):
    assert {"raylet", "gcs_server", "actor"} <= set(killed_ray_driver)
    core = [p for name in ("raylet", "gcs_server", "actor") for p in killed_ray_driver[name]]
    assert _wait_gone(core, timeout_s=15) == []


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.last  # the server is the run's shared one (tests/conftest.py)
def test_a_vllm_server_ends_when_the_process_that_started_it_is_killed(vllm_server):
    server = psutil.Process(vllm_server.pid)
    group = [server, *server.children(recursive=True)]
    assert len(group) >= 2  # the API server and its engine core
    _kill(vllm_server.parent)
    assert _wait_gone(group, timeout_s=45) == []


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.last  # by then the minute has passed in the other tests' time
def test_every_process_of_a_local_ray_cluster_ends_within_a_minute_of_its_driver(killed_ray_driver):
    # Ray's own fate-sharing: its agents see their raylet gone, report it to the (dead) GCS with Ray's fixed 60 s
    # timeout, and exit (measured: 62 s after the driver's SIGKILL)
    assert _wait_gone([p for group in killed_ray_driver.values() for p in group], timeout_s=90) == []

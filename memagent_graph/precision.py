"""Where and in which float type to compute: the GPU when asked (or, with ``auto``, when torch sees one), and
bf16 only where the hardware computes it natively, fp32 elsewhere.

On a CPU without AVX512-BF16 or AMX, torch runs bf16 matrix products through single-threaded reference
kernels: inference is ~5x slower than fp32 (an AVX2-only CPU: bf16 prefill 50 tok/s, fp32 240 tok/s) and a
training backward pass takes minutes per step. Every setting that can pick bf16 (the embedded engine's
``dtype``, the learner's ``bf16_autocast`` and ``param_dtype``) accepts ``auto`` and resolves it here; on a
GPU bf16 is native from compute capability 8 (A100, H100) on.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Literal

from memagent_graph.errors import ConfigError

__all__ = [
    "Bf16Setting",
    "DeviceSetting",
    "cpu_has_native_bf16",
    "cpu_kind",
    "native_bf16",
    "resolve_bf16",
    "resolve_device",
]

logger = logging.getLogger(__name__)

Bf16Setting = bool | Literal["auto"]
"""``auto``: bf16 where the CPU computes it natively; ``True`` / ``False``: always / never."""


DeviceSetting = Literal["auto", "cpu", "cuda"]
"""``auto``: the GPU where torch sees one, else the CPU."""


def resolve_device(setting: DeviceSetting = "auto", *, what: str = "device") -> str:
    """``"cuda"`` or ``"cpu"`` for ``setting``; asking for cuda where torch sees no GPU is a `ConfigError` naming
    ``what`` (the setting)."""
    import torch

    if setting == "cpu":
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    if setting == "cuda":
        raise ConfigError(
            f"{what} is cuda, but torch sees no GPU (torch {torch.__version__}, a CPU build or hidden by "
            "CUDA_VISIBLE_DEVICES); set it to auto or cpu, or install a CUDA build of torch"
        )
    return "cpu"


def native_bf16(device: str = "cpu") -> bool:
    """Whether ``device`` computes bf16 natively (a GPU of compute capability 8+, or a CPU with bf16 flags)."""
    if device == "cuda":
        import torch

        return torch.cuda.is_bf16_supported()
    return cpu_has_native_bf16()


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU has bf16 instructions (the ``avx512_bf16`` or ``amx_bf16`` flag of /proc/cpuinfo)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def cpu_kind() -> str:
    """``AVX512-BF16`` where the CPU computes bf16 natively (AVX512-BF16 or AMX), else ``AVX2``: the two kinds of
    machine whose numbers differ (bf16 on the first, fp32 on the second)."""
    return "AVX512-BF16" if cpu_has_native_bf16() else "AVX2"


def resolve_bf16(setting: Bf16Setting, *, what: str = "bf16", device: str = "cpu") -> bool:
    """Whether to compute in bf16 on ``device`` for ``setting``; an explicit ``True`` where bf16 is not native
    logs one warning naming ``what`` (the setting) and the cost."""
    if setting == "auto":
        return native_bf16(device)
    if setting and not native_bf16(device):
        _warn_slow_bf16(what)
    return bool(setting)


@functools.cache
def _warn_slow_bf16(what: str) -> None:
    logger.warning(
        "%s is on, but this CPU has no native bf16 (no AVX512-BF16 or AMX): bf16 matrix products run on slow "
        "reference kernels, training steps many times slower than in fp32; set it to auto or false",
        what,
    )

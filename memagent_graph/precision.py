"""Which float type to compute in: bf16 only where the hardware computes it natively, fp32 elsewhere.

On a CPU without AVX512-BF16 or AMX, torch runs bf16 matrix products through single-threaded reference
kernels: inference is ~5x slower than fp32 (an AVX2-only CPU: bf16 prefill 50 tok/s, fp32 240 tok/s) and a
training backward pass takes minutes per step. Every setting that can pick bf16 (the embedded engine's
``dtype``, the learner's ``bf16_autocast`` and ``param_dtype``) accepts ``auto`` and resolves it here.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Literal

__all__ = ["Bf16Setting", "cpu_has_native_bf16", "resolve_bf16"]

logger = logging.getLogger(__name__)

Bf16Setting = bool | Literal["auto"]
"""``auto``: bf16 where the CPU computes it natively; ``True`` / ``False``: always / never."""


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU has bf16 instructions (the ``avx512_bf16`` or ``amx_bf16`` flag of /proc/cpuinfo)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_bf16(setting: Bf16Setting, *, what: str = "bf16") -> bool:
    """Whether to compute in bf16 on this CPU for ``setting``; an explicit ``True`` where bf16 is not native
    logs one warning naming ``what`` (the setting) and the cost."""
    if setting == "auto":
        return cpu_has_native_bf16()
    if setting and not cpu_has_native_bf16():
        _warn_slow_bf16(what)
    return bool(setting)


@functools.cache
def _warn_slow_bf16(what: str) -> None:
    logger.warning(
        "%s is on, but this CPU has no native bf16 (no AVX512-BF16 or AMX): bf16 matrix products run on slow "
        "reference kernels, training steps many times slower than in fp32; set it to auto or false",
        what,
    )

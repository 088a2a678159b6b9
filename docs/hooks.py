"""mkdocs hook: give the API reference the package as it is installed.

`pyproject.toml` maps `nodes/`, `integrations/` and `training/` into the `memagent_graph` namespace
(setuptools `package-dir`). mkdocstrings reads the sources with griffe, which finds a package's modules by
folder, so before each build this lays the installed layout out as a folder of links,
`build/api-source/memagent_graph/`, which `mkdocs.yml` gives mkdocstrings as its search path.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
API_SOURCE = ROOT / "build" / "api-source"


def package_links() -> dict[str, Path]:
    """Each entry of the installed `memagent_graph` folder (relative name) and the file or folder it is."""
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    core = ROOT / package_dir["memagent_graph"]
    links = {entry.name: entry for entry in core.iterdir() if entry.name != "__pycache__"}
    for name, folder in package_dir.items():
        if name != "memagent_graph":
            links[name.removeprefix("memagent_graph.").replace(".", "/")] = ROOT / folder
    return links


def build_api_source() -> Path:
    """Create or refresh `build/api-source/memagent_graph/` (links only; safe to run again)."""
    top = API_SOURCE / "memagent_graph"
    top.mkdir(parents=True, exist_ok=True)
    links = package_links()
    for entry in top.iterdir():
        if entry.name not in links or not entry.is_symlink() or entry.resolve() != links[entry.name]:
            entry.unlink()
    for name, target in links.items():
        link = top / name
        if not link.is_symlink():
            link.symlink_to(target, target_is_directory=target.is_dir())
    return API_SOURCE


def on_startup(**_: Any) -> None:
    build_api_source()


def on_config(config: Any, **_: Any) -> Any:
    build_api_source()  # `mkdocs serve` rebuilds without a new startup
    return config

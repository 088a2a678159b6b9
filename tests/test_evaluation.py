"""`memagent eval`: every method reads the same generated documents with the same model, scored by the task."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from memagent_graph.config import MemAgentConfig
from memagent_graph.errors import ConfigError
from memagent_graph.training.data.haystacks import filler
from memagent_graph.training.eval.baselines import BASELINES
from memagent_graph.training.eval.evaluation import (
    METHODS,
    SENTENCE_METHODS,
    build_readers,
    check_methods,
    evaluate,
    parse_lengths,
    summarize,
    write_results,
)

pytestmark = pytest.mark.integration  # not in the unit tier: full evaluation runs

CONFIG = MemAgentConfig(chunk_tokens=512, memory_tokens=64, answer_tokens=48, temperature=0.0)


class LookupModel(BaseChatModel):
    """Repeats the asked key's needle with its value boxed when the needle is anywhere in its prompt, else "none"."""

    @property
    def _llm_type(self) -> str:
        return "lookup"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        prompt = str(messages[-1].content)
        key = re.search(r"for (\S+) mentioned", prompt)
        found = key and re.search(rf"for {re.escape(key.group(1))} is: (\d+)", prompt)
        reply = f"The number for {key.group(1)} is: {found.group(1)}. \\boxed{{{found.group(1)}}}" if found else "none"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


@pytest.fixture(scope="module")
def readers(embedded_tokenizer):
    return build_readers(METHODS, LookupModel(), embedded_tokenizer, config=CONFIG, context_window=1024)


def _needle_in_the_middle(tokenizer, tokens: int) -> tuple[str, str]:
    import random

    units = filler(tokens, source="kjv", tokenizer=tokenizer, rng=random.Random(3))
    middle = len(units) // 2
    document = "\n".join(
        [*units[:middle], "One of the special magic numbers for calm-river is: 4417001.", *units[middle:]]
    )
    return "What is the special magic number for calm-river mentioned in the provided text?", document


def test_methods_are_memagent_and_every_baseline():
    assert set(METHODS) == {"memagent", *BASELINES, *SENTENCE_METHODS}


def test_a_middle_needle_is_found_by_memagent_and_retrieval_but_cut_by_truncation(readers, embedded_tokenizer):
    question, document = _needle_in_the_middle(embedded_tokenizer, 6000)
    assert readers["bm25"](question, document).reply.endswith("\\boxed{4417001}")
    assert readers["embedding"](question, document).reply.endswith("\\boxed{4417001}")
    assert readers["truncation"](question, document).reply == "none"


def test_memagent_reads_past_the_window_and_answers_from_its_memory(readers, embedded_tokenizer):
    question, document = _needle_in_the_middle(embedded_tokenizer, 6000)
    reading = readers["memagent"](question, document)
    assert reading.reply == "\\boxed{4417001}"  # the reply as the model gave it: the verifier reads it
    [(start, end)] = reading.cited  # where the memory's needle was read
    assert "4417001" in document[start:end]


def test_full_context_does_not_run_on_a_document_beyond_the_window(readers, embedded_tokenizer):
    question, document = _needle_in_the_middle(embedded_tokenizer, 6000)
    assert readers["full"](question, document) is None
    short_question, short_document = _needle_in_the_middle(embedded_tokenizer, 400)
    reading = readers["full"](short_question, short_document)
    assert reading.reply.endswith("\\boxed{4417001}") and reading.cited is None  # it cites nothing


@pytest.fixture(scope="module")
def records(readers, embedded_tokenizer) -> list:
    """Every method on two samples at 512 and 4K tokens: one evaluation shared by the tests that score it."""
    return evaluate(["niah_single_1"], [512, 4096], samples=2, readers=readers, tokenizer=embedded_tokenizer)


def test_evaluation_scores_each_method_on_each_sample_and_writes_json_table_and_plot(records, tmp_path):
    assert len(records) == 2 * 2 * len(METHODS)
    summary = summarize(records)
    assert summary[("niah_single_1", 4096, "full")] is None
    assert summary[("niah_single_1", 512, "full")] == summary[("niah_single_1", 4096, "memagent")] == 1.0
    paths = write_results(records, tmp_path, settings={"note": "test"})
    saved = json.loads(paths["json"].read_text())
    assert len(saved["records"]) == len(records) and saved["settings"] == {"note": "test"}
    assert "| niah_single_1 | 4K |" in paths["table"].read_text() and "n/a" in paths["table"].read_text()
    assert paths["plot"].read_bytes().startswith(b"\x89PNG")


def test_citing_methods_are_scored_on_citation_recall_and_groundedness(records, tmp_path):
    recall, grounded = summarize(records, "citation_recall"), summarize(records, "grounded")
    assert recall[("niah_single_1", 4096, "memagent")] == grounded[("niah_single_1", 4096, "memagent")] == 1.0
    assert recall[("niah_single_1", 4096, "bm25")] == 1.0  # the needle's passage was retrieved
    for method in SENTENCE_METHODS:  # the needle's sentence was kept, and the answer step found it there
        assert recall[("niah_single_1", 4096, method)] == summarize(records)[("niah_single_1", 4096, method)] == 1.0
    assert recall[("niah_single_1", 4096, "truncation")] is None and grounded[("niah_single_1", 4096, "full")] is None
    report = (write_results(records, tmp_path, settings={})["table"]).read_text()
    assert "Citation recall (%)" in report and "Groundedness (%)" in report
    assert "truncation" not in report.split("Citation recall (%)")[1]  # only the methods that cite


@pytest.mark.parametrize(
    ("text", "lengths"), [("4k,16k", [4096, 16384]), ("1m", [1048576]), ("3000, 8K", [3000, 8192])]
)
def test_lengths_read_k_and_m_as_binary_thousands(text, lengths):
    assert parse_lengths(text) == lengths


@pytest.mark.parametrize("text", ["4x", "", "12", "k"])
def test_a_bad_length_is_a_config_error(text):
    with pytest.raises(ConfigError):
        parse_lengths(text)


def test_an_unknown_method_names_the_known_ones():
    with pytest.raises(ConfigError, match="bm25"):
        check_methods(["memagent", "rag"])


@pytest.mark.slow
def test_memagent_eval_runs_with_the_embedded_engine(tmp_path):
    command = [
        sys.executable,
        "-m",
        "memagent_graph.integrations.cli",
        "eval",
        "--task",
        "niah_single_1",
        "--lengths",
        "1k",
    ]
    command += ["--samples", "1", "--methods", "memagent,bm25", "--chunk-tokens", "512", "--memory-tokens", "64"]
    done = subprocess.run(
        [*command, "--output-dir", str(tmp_path), "--quiet"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"\| niah_single_1 \| 1K \| [\d.]+ \| [\d.]+ \|", done.stdout)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert [r["method"] for r in saved["records"]] == ["memagent", "bm25"]
    assert (tmp_path / "accuracy.png").is_file()


def test_groundedness_accepts_a_reworded_answer_and_rejects_an_invented_one():
    from memagent_graph.training.data.tasks import Task
    from memagent_graph.training.eval.baselines import Reading
    from memagent_graph.training.eval.evaluation import citation_scores

    fact = "One of the special magic numbers for calm-river is: 4417001."
    task = Task(
        "What is the special magic number for calm-river?", f"Filler words.\n{fact}\nMore.", ["4417001"], (fact,)
    )
    cited = Reading("", ((14, 14 + len(fact)),))
    reworded = "The special magic number for calm-river mentioned in the provided text is 4417001."
    assert citation_scores(cited, reworded, task) == (1.0, 1.0)
    assert citation_scores(cited, "The number is 9999999.", task) == (1.0, 0.0)
    assert citation_scores(Reading("", ((0, 5),)), reworded, task) == (0.0, 0.0)  # cited the filler only
    assert citation_scores(Reading(""), reworded, task) == (None, None)  # a method that does not cite


@pytest.mark.integration
def test_a_stopped_task_eval_resumes_answering_only_the_missing_documents(memagent, tokenizer, tmp_path):
    from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

    out = tmp_path / "out"
    args = ["eval", "--task", "niah_single_1", "--lengths", "1k", "--samples", "2", "--methods", "memagent,bm25",
            "--chunk-tokens", "300", "--memory-tokens", "100", "--answer-tokens", "30", "--output-dir", str(out),
            "--quiet"]  # fmt: skip
    with SimulatedOpenAIServer(tokenizer=tokenizer) as server:
        assert memagent(*args, "--base-url", server.base_url).returncode == 0
        records = (out / "records.jsonl").read_text().splitlines()
        (out / "records.jsonl").write_text("\n".join(records[:2]) + "\n" + records[2][:20])  # killed mid-line
        refused = memagent(*args, "--base-url", server.base_url)
        before = len(server.requests)
        resumed = memagent(*args, "--base-url", server.base_url, "--resume")
    assert refused.returncode != 0 and "add --resume" in refused.stderr
    assert resumed.returncode == 0, resumed.stderr
    saved = json.loads((out / "results.json").read_text())
    assert sorted((r["sample"], r["method"]) for r in saved["records"]) == [
        (0, "bm25"), (0, "memagent"), (1, "bm25"), (1, "memagent")
    ]  # fmt: skip
    assert 0 < len(server.requests) - before
    assert {"exact_match", "sub_em", "seconds_per_document"} <= set(saved["summary"][0])


@pytest.mark.integration
def test_limit_with_a_task_is_the_number_of_documents_and_may_not_meet_samples(memagent, tokenizer, tmp_path):
    from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

    args = ["eval", "--task", "niah_single_1", "--lengths", "1k", "--methods", "bm25", "--quiet"]
    with SimulatedOpenAIServer(tokenizer=tokenizer) as server:
        limited = memagent(*args, "--limit", "2", "--base-url", server.base_url, "--output-dir", str(tmp_path / "a"))
        both = memagent(*args, "--limit", "2", "--samples", "2", "--base-url", server.base_url,
                        "--output-dir", str(tmp_path / "b"))  # fmt: skip
    assert limited.returncode == 0, limited.stderr
    saved = json.loads((tmp_path / "a" / "results.json").read_text())
    assert saved["settings"]["samples"] == 2 and len(saved["records"]) == 2
    assert both.returncode != 0 and "--limit and --samples" in both.stderr


@pytest.mark.integration
def test_a_resumed_task_eval_with_more_samples_answers_only_the_new_documents(memagent, tokenizer, tmp_path):
    from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

    out = tmp_path / "out"
    args = ["eval", "--task", "niah_single_1", "--lengths", "1k", "--methods", "memagent,bm25", "--chunk-tokens",
            "300", "--memory-tokens", "100", "--answer-tokens", "30", "--output-dir", str(out), "--quiet"]  # fmt: skip
    with SimulatedOpenAIServer(tokenizer=tokenizer) as server:
        assert memagent(*args, "--samples", "1", "--base-url", server.base_url).returncode == 0
        first = {json.dumps(r, sort_keys=True) for r in json.loads((out / "results.json").read_text())["records"]}
        grown = memagent(*args, "--samples", "2", "--base-url", server.base_url, "--resume")
        shrunk = memagent(*args, "--samples", "1", "--base-url", server.base_url, "--resume")
    assert grown.returncode == 0, grown.stderr
    records = json.loads((out / "results.json").read_text())["records"]
    assert sorted((r["sample"], r["method"]) for r in records) == [
        (0, "bm25"), (0, "memagent"), (1, "bm25"), (1, "memagent")
    ]  # fmt: skip
    assert first <= {json.dumps(r, sort_keys=True) for r in records}  # sample 0's answers kept as they were
    assert shrunk.returncode != 0 and "other settings (samples)" in shrunk.stderr

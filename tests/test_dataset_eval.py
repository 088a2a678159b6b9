"""`memagent eval --dataset FILE`: every method answers every row, scored with MemAgent's evaluation metrics (and
RULER's for RULER rows), a headline named, every answer kept, resumable; bad input runs nothing."""

from __future__ import annotations

import json

import pytest

from memagent_graph.testing.dataset_files import QARow, write_format
from memagent_graph.testing.simulated_server import SimulatedOpenAIServer
from memagent_graph.training.eval.dataset_eval import answer_metrics
from memagent_graph.training.eval.record_log import reading_code_digest

SMALL = ["--chunk-tokens", "300", "--memory-tokens", "100", "--answer-tokens", "30", "--quiet"]
FILLER = "The grass is green. The sky is blue. " * 4


def _rows(golds: list[str]) -> list[QARow]:
    """Rows the loopback server's rule model answers: row ``i``'s answer is ``code{i}``."""
    return [
        QARow("What is the special magic code?", (gold,), f"{FILLER}\n\nThe special magic code is code{i}.\n\n{FILLER}")
        for i, gold in enumerate(golds)
    ]


@pytest.mark.unit
def test_the_metrics_of_an_answer_against_its_golds():
    exact = answer_metrics("Paris", "\\boxed{Paris}", ["paris"])
    assert exact == {"sub_em": 1.0, "exact_match": 1.0, "sub_em_gold_in_answer": 1.0, "sub_em_answer_in_gold": 1.0,
                     "token_f1": 1.0, "verifier": 1.0}  # fmt: skip
    longer = answer_metrics("the city of Paris", "the city of Paris", ["Paris"])
    assert (longer["exact_match"], longer["sub_em_gold_in_answer"], longer["sub_em_answer_in_gold"]) == (0.0, 1.0, 0.0)
    assert longer["token_f1"] == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1)) and longer["verifier"] == 0.0
    shorter = answer_metrics("Paris", "\\boxed{Paris}", ["Paris, France"])
    assert (shorter["sub_em"], shorter["sub_em_gold_in_answer"], shorter["sub_em_answer_in_gold"]) == (1.0, 0.0, 1.0)
    assert answer_metrics("a b", "a b", ["a", "c"], ruler=True)["ruler_match_all"] == 0.5


@pytest.fixture
def server(tokenizer):
    with SimulatedOpenAIServer(tokenizer=tokenizer) as running:
        yield running


def _eval(memagent, server, path, out, *extra):
    return memagent("eval", "--dataset", str(path), "--base-url", server.base_url, "--methods", "memagent,bm25",
                    "--output-dir", str(out), *SMALL, *extra)  # fmt: skip


@pytest.mark.integration
@pytest.mark.parametrize(
    ("name", "headline"),
    [("memagent-eval.json", "sub_em"), ("ruler.jsonl", "ruler_match_all"), ("longbench.jsonl", "sub_em"),
     ("generic.csv", "sub_em"), ("memagent-train.parquet", "sub_em")],
)  # fmt: skip
def test_each_format_evaluates_every_row_with_every_method(name, headline, memagent, server, tmp_path):
    path = write_format(tmp_path, name, _rows(["code0", "the code1 string", "other"]))
    result = _eval(memagent, server, path, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert (
        saved["headline"] == headline and f"Headline: {'sub-EM' if headline == 'sub_em' else 'RULER'}" in result.stdout
    )
    answers = {(r["row"], r["method"]): r for r in saved["records"]}
    assert len(answers) == 6 and [answers[i, "memagent"]["answer"] for i in range(3)] == ["code0", "code1", "code2"]
    assert answers[1, "memagent"]["metrics"]["exact_match"] == 0.0
    assert answers[1, "memagent"]["metrics"]["sub_em_answer_in_gold"] == 1.0
    # sub-EM takes "code1" inside its gold; RULER's match wants the gold inside the answer
    assert saved["summary"]["memagent"][headline] == pytest.approx(2 / 3 if headline == "sub_em" else 1 / 3)
    assert saved["summary"]["memagent"]["verifier"] == pytest.approx(1 / 3)  # only code0 is the boxed gold exactly


@pytest.mark.integration
def test_limit_reads_the_first_rows_and_resume_answers_only_the_missing_ones(memagent, server, tmp_path):
    path = write_format(tmp_path, "generic.jsonl", _rows([f"code{i}" for i in range(4)]))
    out = tmp_path / "out"
    assert _eval(memagent, server, path, out, "--limit", "2").returncode == 0
    records = (out / "records.jsonl").read_text().splitlines()
    assert len(records) == 4  # 2 rows x 2 methods
    (out / "records.jsonl").write_text("\n".join(records[:3]) + "\n" + records[3][:20])  # killed mid-line
    before = len(server.requests)
    result = _eval(memagent, server, path, out, "--resume")
    assert result.returncode == 0, result.stderr
    saved = json.loads((out / "results.json").read_text())
    assert sorted((r["row"], r["method"]) for r in saved["records"]) == sorted(
        (row, method) for row in range(4) for method in ("memagent", "bm25")
    )  # no pair twice: row 1's bm25 answered again, rows 0 and 1's memagent answers kept
    assert len(server.requests) > before


@pytest.mark.integration
def test_a_resume_with_other_settings_is_refused(memagent, server, tmp_path):
    path = write_format(tmp_path, "generic.jsonl", _rows(["code0"]))
    assert _eval(memagent, server, path, tmp_path / "out").returncode == 0
    result = _eval(memagent, server, path, tmp_path / "out", "--resume", "--memory-tokens", "90")
    assert result.returncode != 0
    assert "was run with other settings (reading)" in result.stderr


def _one_row_then_settings_edited(memagent, server, tmp_path, edit):
    """A run of the first of two rows into ``tmp_path/out``, then its settings.json rewritten by ``edit``
    (as an older run would have written it); the data file's path."""
    path = write_format(tmp_path, "generic.jsonl", _rows(["code0", "code1"]))
    assert _eval(memagent, server, path, tmp_path / "out", "--limit", "1").returncode == 0
    settings = tmp_path / "out" / "settings.json"
    saved = json.loads(settings.read_text())
    edit(saved)
    settings.write_text(json.dumps(saved))
    return path


@pytest.mark.integration
def test_a_resume_after_the_reading_code_changed_is_refused(memagent, server, tmp_path):
    def older_reader(saved):
        assert saved["reading_code"] == reading_code_digest()
        saved["reading_code"] = "an older reader"

    path = _one_row_then_settings_edited(memagent, server, tmp_path, older_reader)
    result = _eval(memagent, server, path, tmp_path / "out", "--resume")
    assert result.returncode != 0 and "the reading code has changed since that run" in result.stderr


@pytest.mark.unit
def test_the_reading_code_digest_follows_every_source_file_of_its_packages(tmp_path, monkeypatch):
    package = tmp_path / "reader_under_test"
    (package / "steps").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "steps" / "__init__.py").write_text("")
    (package / "steps" / "answer.py").write_text("WEIGHT = 1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = reading_code_digest(("reader_under_test",))
    assert reading_code_digest(("reader_under_test",)) == before
    (package / "steps" / "answer.py").write_text("WEIGHT = 2.0\n")
    assert reading_code_digest(("reader_under_test",)) != before


@pytest.mark.integration
def test_a_run_made_before_a_reading_option_existed_resumes_with_that_option_at_its_default(memagent, server, tmp_path):
    def before_segments(saved):
        del saved["reading"]["segments"]  # as written before `segments` was an option

    path = _one_row_then_settings_edited(memagent, server, tmp_path, before_segments)
    assert _eval(memagent, server, path, tmp_path / "out", "--resume").returncode == 0
    result = _eval(memagent, server, path, tmp_path / "out", "--resume", "--segments", "2")
    assert result.returncode != 0 and "was run with other settings (reading)" in result.stderr


@pytest.mark.integration
def test_answers_already_in_the_output_folder_are_never_overwritten(memagent, server, tmp_path):
    path = write_format(tmp_path, "generic.jsonl", _rows(["code0"]))
    assert _eval(memagent, server, path, tmp_path / "out").returncode == 0
    result = _eval(memagent, server, path, tmp_path / "out")
    assert result.returncode != 0 and "add --resume, or use another --output-dir" in result.stderr


@pytest.mark.integration
def test_neither_or_both_of_task_and_dataset_say_which(memagent, server, tmp_path):
    path = write_format(tmp_path, "generic.jsonl", _rows(["code0"]))
    neither = memagent("eval", "--base-url", server.base_url)
    assert neither.returncode != 0 and "--task niah_single_2 (generated tasks) or --dataset FILE" in neither.stderr
    both = memagent("eval", "--task", "vt", "--dataset", str(path), "--base-url", server.base_url)
    assert both.returncode != 0 and "drop --task to read the file's rows, or --dataset" in both.stderr


@pytest.mark.integration
def test_a_bad_dataset_is_one_line_and_calls_no_model(memagent, server, tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text('{"question": "Q?", "answers": [], "document": "d"}\n', encoding="utf-8")
    result = _eval(memagent, server, path, tmp_path / "out")
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert len(errors) == 1 and "qa.jsonl: row 0, column `answers`: no answers" in errors[0]
    assert server.requests == [] and not (tmp_path / "out").exists()


@pytest.mark.integration
def test_columns_rename_the_fields_and_skipped_rows_are_counted(memagent, server, tmp_path):
    rows = _rows(["code0", "code1"])
    records = [{"query": r.question, "gold": list(r.answers), "text": r.document, "proof": [f"code is code{i}."]}
               for i, r in enumerate(rows)]  # fmt: skip
    records.insert(1, {"query": "Q?", "gold": [], "text": "d", "proof": []})  # a bad row between the good ones
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    columns = "question=query,answers=gold,document=text,evidence=proof"
    result = _eval(memagent, server, path, tmp_path / "out", "--columns", columns, "--on-bad-row", "skip")
    assert result.returncode == 0, result.stderr
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert sorted({r["row"] for r in saved["records"]}) == [0, 2] and saved["skipped_rows"] == 1
    assert saved["summary"]["memagent"]["sub_em"] == 1.0 and saved["summary"]["bm25"]["citation_recall"] == 1.0
    assert saved["settings"]["columns"] == {"question": "query", "answers": "gold", "document": "text",
                                            "evidence": "proof"}  # fmt: skip


@pytest.mark.integration
@pytest.mark.parametrize(
    ("task_options", "dataset_options"),
    [((), ("--samples", "2")), ((), ("--lengths", "4k")), ((), ("--hotpotqa", "h.json")),
     (("--columns", "question=q"), ()), (("--on-bad-row", "skip"), ())],
)  # fmt: skip
def test_options_of_the_other_source_are_refused(task_options, dataset_options, memagent, server, tmp_path):
    path = write_format(tmp_path, "generic.jsonl", _rows(["code0"]))
    source = ("--dataset", str(path), *dataset_options) if dataset_options else ("--task", "vt", *task_options)
    result = memagent("eval", *source, "--base-url", server.base_url, "--output-dir", str(tmp_path / "out"))
    assert result.returncode != 0 and "apply to --" in result.stderr
    assert server.requests == [] and not (tmp_path / "out").exists()

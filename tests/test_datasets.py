"""Data files as people have them: every format read as rows, resumed at a row, bad rows named in one line
(or skipped and counted when asked), nothing held whole."""

from __future__ import annotations

import json

import pytest

from memagent_graph.testing.dataset_files import FORMAT_WRITERS, QARow, write_format, write_generic_jsonl
from memagent_graph.training.data.datasets import DatasetError, open_dataset

pytestmark = pytest.mark.unit

ROWS = [QARow(f"Where is item {i}?", (f"shelf {i}",), f"Item {i} is on shelf {i}.", (f"Item {i}.",)) for i in range(5)]
FORMATS = {
    "memagent-train.parquet": "memagent-train", "memagent-eval.json": "memagent-eval", "ruler.jsonl": "ruler",
    "longbench.jsonl": "longbench", "generic.jsonl": "generic", "generic.parquet": "generic", "generic.csv": "generic",
}  # fmt: skip


def _jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", list(FORMAT_WRITERS))
def test_each_format_reads_the_question_answers_and_document_of_every_row(name, tmp_path):
    dataset = open_dataset(write_format(tmp_path, name, ROWS))
    rows = list(dataset.rows())
    assert dataset.format == FORMATS[name]
    assert [(r.row, r.question, r.answers, r.document) for r in rows] == [
        (i, q.question, q.answers, q.document) for i, q in enumerate(ROWS)
    ]


def test_memagents_training_parquet_keeps_its_data_source_and_index(tmp_path):
    row = next(open_dataset(write_format(tmp_path, "memagent-train.parquet", ROWS)).rows())
    assert (row.data_source, row.id) == ("hotpotqa", "0")


@pytest.mark.parametrize("name", ["memagent-train.parquet", "generic.csv", "memagent-eval.json", "generic.jsonl"])
def test_rows_resume_at_the_row_asked_for(name, tmp_path):
    rows = list(open_dataset(write_format(tmp_path, name, ROWS)).rows(start=3))  # Parquet: in the second row group
    assert [r.row for r in rows] == [3, 4]


def test_a_columns_mapping_reads_a_file_with_other_names(tmp_path):
    path = _jsonl(tmp_path / "qa.jsonl", [{"query": "Q?", "gold": "A", "text": "The answer is A."}])
    row = next(open_dataset(path, columns={"question": "query", "answers": "gold", "document": "text"}).rows())
    assert (row.question, row.answers, row.document) == ("Q?", ("A",), "The answer is A.")


def test_an_unknown_field_in_columns_lists_the_fields(tmp_path):
    path = write_generic_jsonl(tmp_path / "qa.jsonl", ROWS)
    with pytest.raises(DatasetError, match="unknown field query in columns; use question, answers, document, path"):
        open_dataset(path, columns={"query": "question"})


def test_longbench_rows_take_their_id_from_id_when_there_is_no_underscore_id(tmp_path):
    path = _jsonl(tmp_path / "lb.jsonl", [{"id": "x7", "input": "Q?", "context": "d", "answers": ["A"]}])
    row = next(open_dataset(path).rows())
    assert (row.format, row.id) == ("longbench", "x7")


def test_csv_cells_holding_json_lists_give_answers_and_evidence(tmp_path):
    path = tmp_path / "qa.csv"
    path.write_text('question,answers,document,evidence\nQ?,"[""A"", ""B""]",d,"[""s1"", ""s2""]"\n', encoding="utf-8")
    row = next(open_dataset(path).rows())
    assert (row.answers, row.evidence) == (("A", "B"), ("s1", "s2"))


def test_path_rows_read_a_text_file_under_the_data_folder(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("The key is under the mat.", encoding="utf-8")
    path = _jsonl(tmp_path / "qa.jsonl", [{"question": "Where?", "answers": ["mat"], "path": "docs/a.txt"}])
    assert next(open_dataset(path).rows()).document == "The key is under the mat."


def test_a_hugging_face_dataset_is_read_like_a_file():
    datasets = pytest.importorskip("datasets")
    data = datasets.Dataset.from_list([{"question": "Q?", "answers": ["A"], "document": "A doc."}] * 3)
    dataset = open_dataset(data)
    assert dataset.name == "<datasets.Dataset>" and dataset.num_rows == 3
    assert [r.answers for r in dataset.rows(1)] == [("A",), ("A",)]


def test_a_truncated_json_array_streams_its_whole_rows_before_the_error(tmp_path):
    path = write_format(tmp_path, "memagent-eval.json", ROWS)
    text = path.read_text()
    path.write_text(text[: text.index('"index": 3')], encoding="utf-8")  # cut inside the fourth row
    rows = open_dataset(path).rows()
    assert [next(rows).row for _ in range(3)] == [0, 1, 2]  # streamed: read before the damage is reached
    with pytest.raises(DatasetError, match=r"memagent-eval\.json: row 3, invalid or truncated JSON"):
        next(rows)


# bad data: one line naming file, row and column, and what to do


def _one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def test_a_missing_column_names_it_and_the_columns_found(tmp_path):
    path = write_format(tmp_path, "generic.csv", ROWS)
    with pytest.raises(DatasetError) as error:
        open_dataset(path, columns={"answers": "gold"})
    assert _one_line(error).endswith(
        "generic.csv: no column `gold` (answers); columns: answers, document, id, question; "
        "name the file's columns in columns= (memagent: --columns)"
    )


def test_a_row_with_no_answers_is_named_with_its_row_and_column(tmp_path):
    path = _jsonl(tmp_path / "qa.jsonl", [{"question": "Q?", "answers": ["A"], "document": "d"},
                                          {"question": "Q?", "answers": [], "document": "d"}])  # fmt: skip
    with pytest.raises(DatasetError) as error:
        list(open_dataset(path).rows())
    message = _one_line(error)
    assert "qa.jsonl: row 1, column `answers`: no answers (an empty list); give at least one gold answer" in message
    assert 'on_bad_row="skip"' in str(error.value)


def test_a_key_missing_from_one_json_row_is_named_as_missing(tmp_path):
    path = _jsonl(tmp_path / "qa.jsonl", [{"question": "Q?", "answers": ["A"], "document": "d"},
                                          {"question": "Q?", "document": "d"}])  # fmt: skip
    with pytest.raises(DatasetError, match=r"qa\.jsonl: row 1, column `answers`: no answers \(the key is missing\)"):
        list(open_dataset(path).rows())


def test_a_question_that_is_not_text_is_named(tmp_path):
    path = _jsonl(tmp_path / "qa.jsonl", [{"question": 7, "answers": ["A"], "document": "d"}])
    with pytest.raises(DatasetError, match=r"row 0, column `question`: no question \(int, not text\)"):
        list(open_dataset(path).rows())


def test_an_invalid_json_line_names_its_row_and_line(tmp_path):
    good = json.dumps({"question": "Q?", "answers": ["A"], "document": "d"})
    path = tmp_path / "qa.jsonl"
    path.write_text(f"{good}\n\n{{oops\n{good}\n", encoding="utf-8")  # a blank line: not a row
    with pytest.raises(DatasetError, match=r"qa\.jsonl: row 1: line 3 is not JSON"):
        list(open_dataset(path).rows())


def test_a_json_array_with_invalid_json_is_one_line(tmp_path):
    path = tmp_path / "qa.json"
    path.write_text('[{"question": "Q?", "answers": ["A"], "document": "d"}, oops]', encoding="utf-8")
    with pytest.raises(DatasetError) as error:
        list(open_dataset(path).rows())
    assert "qa.json: row 1, invalid or truncated JSON" in _one_line(error)


def test_a_ruler_file_without_context_says_where_rulers_document_is(tmp_path):
    path = _jsonl(tmp_path / "niah.jsonl", [{"index": 0, "input": "doc... Q?", "outputs": ["A"]}])
    with pytest.raises(DatasetError, match=r"column `context`: missing; RULER's own files put the document inside"):
        open_dataset(path)


def test_an_empty_document_is_named(tmp_path):
    path = _jsonl(tmp_path / "qa.jsonl", [{"question": "Q?", "answers": ["A"], "document": "  "}])
    with pytest.raises(DatasetError, match=r"qa\.jsonl: row 0, column `document`: empty document"):
        list(open_dataset(path).rows())


@pytest.mark.parametrize("where", ["../outside.txt", "/etc/hostname", "link.txt"])
def test_a_path_outside_the_data_folder_is_refused(where, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "outside.txt").write_text("secret", encoding="utf-8")
    (data / "link.txt").symlink_to(tmp_path / "outside.txt")
    path = _jsonl(data / "qa.jsonl", [{"question": "Q?", "answers": ["A"], "path": where}])
    with pytest.raises(DatasetError, match=r"row 0, column `path`: .* leads outside the data folder"):
        list(open_dataset(path).rows())


def test_a_truncated_parquet_file_is_named(tmp_path):
    path = write_format(tmp_path, "memagent-train.parquet", ROWS)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DatasetError, match=r"memagent-train\.parquet: not a Parquet file, or a truncated one"):
        open_dataset(path)


def test_a_file_named_parquet_that_is_not_parquet_is_named(tmp_path):
    path = tmp_path / "train.parquet"
    path.write_text("question,answers\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"train\.parquet: not a Parquet file"):
        open_dataset(path)


def test_an_unknown_format_lists_the_columns_found_and_the_way_out(tmp_path):
    path = _jsonl(tmp_path / "qa.jsonl", [{"prompt_text": "Q?", "label": "A"}])
    with pytest.raises(DatasetError) as error:
        open_dataset(path)
    assert "qa.jsonl: unknown format (columns: label, prompt_text)" in _one_line(error)
    assert "pass columns=" in str(error.value)
    (tmp_path / "qa.txt").write_text("x", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"unknown file type '\.txt'"):
        open_dataset(tmp_path / "qa.txt")


def test_skipping_bad_rows_counts_them(tmp_path):
    path = _jsonl(tmp_path / "qa.jsonl", [{"question": "Q?", "answers": [], "document": "d"},
                                          {"question": "Q?", "answers": ["A"], "document": "d"}])  # fmt: skip
    dataset = open_dataset(path, on_bad_row="skip")
    assert [r.row for r in dataset.rows()] == [1] and dataset.skipped == 1


def test_check_reads_only_the_first_rows_and_counts_no_skips(tmp_path):
    bad = {"question": "Q?", "answers": [], "document": "d"}
    path = _jsonl(tmp_path / "qa.jsonl", [bad] * 8 + [{"question": "Q?", "answers": ["A"], "document": "d"}])
    dataset = open_dataset(path, on_bad_row="skip")
    with pytest.raises(DatasetError, match=r"row 0, column `answers`: .*none of the first 8 rows is usable"):
        dataset.check(8)
    dataset.check(9)
    assert dataset.skipped == 0


def test_check_fails_on_a_bad_first_row_and_with_skip_only_when_no_row_is_good(tmp_path):
    bad = {"question": "Q?", "answers": [], "document": "d"}
    path = _jsonl(tmp_path / "qa.jsonl", [bad, {"question": "Q?", "answers": ["A"], "document": "d"}])
    with pytest.raises(DatasetError, match="row 0, column `answers`"):
        open_dataset(path).check()
    open_dataset(path, on_bad_row="skip").check()
    only_bad = _jsonl(tmp_path / "bad.jsonl", [bad])
    with pytest.raises(DatasetError, match="row 0, column `answers`"):
        open_dataset(only_bad, on_bad_row="skip").check()


def test_memagents_over_1m_contexts_of_paragraph_indices_say_how_to_rebuild_them(tmp_path):
    path = tmp_path / "eval_25600.json"
    path.write_text(json.dumps([{"index": 0, "input": "Q?", "context": [1, 2], "answers": ["A"], "num_docs": 2}]))
    with pytest.raises(DatasetError, match="paragraph indices.*rebuild the text"):
        list(open_dataset(path).rows())

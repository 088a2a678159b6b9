"""HotpotQA: the official file format, MemAgent's long-document synthesis, and the closed-book filter."""

from __future__ import annotations

import json

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from memagent_graph.errors import ConfigError
from memagent_graph.training.data.hotpotqa import closed_book_filter, load_hotpotqa, synthesize_hotpotqa
from memagent_graph.training.eval.baselines import Reading


def _question(number: int) -> dict:
    """A question in the official dev-distractor layout, with ten paragraphs of its own."""
    context = [
        [f"Title {number}-{p}", [f"Paragraph {p} of question {number} says a thing.", " And more."]] for p in range(10)
    ]
    return {
        "_id": f"q{number}",
        "question": f"Which town links item {number}?",
        "answer": f"Town{number}",
        "supporting_facts": [[f"Title {number}-0", 0], [f"Title {number}-3", 1]],
        "context": context,
        "type": "bridge",
        "level": "hard",
    }


@pytest.fixture
def hotpot_file(tmp_path):
    path = tmp_path / "hotpot_dev_distractor_v1.json"
    path.write_text(json.dumps([_question(n) for n in range(30)]))
    return path


def test_the_official_json_loads_with_paragraphs_and_supporting_sentences(hotpot_file):
    questions = load_hotpotqa(hotpot_file)
    assert len(questions) == 30 and questions[0].answer == "Town0"
    assert questions[0].evidence() == ("Paragraph 0 of question 0 says a thing.", "And more.")


def test_the_hugging_face_parquet_variant_loads_the_same(hotpot_file, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for row in json.loads(hotpot_file.read_text()):
        rows.append(
            {
                "id": row["_id"],
                "question": row["question"],
                "answer": row["answer"],
                "context": {"title": [t for t, _ in row["context"]], "sentences": [s for _, s in row["context"]]},
                "supporting_facts": {
                    "title": [t for t, _ in row["supporting_facts"]],
                    "sent_id": [i for _, i in row["supporting_facts"]],
                },
            }
        )
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "dev.parquet")
    assert load_hotpotqa(tmp_path / "dev.parquet") == load_hotpotqa(hotpot_file)


def test_synthesis_keeps_every_own_paragraph_and_pads_to_the_length_with_others(hotpot_file, embedded_tokenizer):
    questions = load_hotpotqa(hotpot_file)
    [task] = synthesize_hotpotqa(questions[:1], tokens=300, tokenizer=embedded_tokenizer)
    assert all(f"Title 0-{p}\n" in task.document for p in range(10))
    [long_task] = synthesize_hotpotqa(questions, tokens=3000, tokenizer=embedded_tokenizer, count=1)
    assert abs(embedded_tokenizer.count(long_task.document) - 3000) < 300
    assert "question 7" in long_task.document and long_task.document.startswith("Document 1:\n")
    assert long_task.golds == ["Town0"] and all(sentence in long_task.document for sentence in long_task.evidence)


def test_synthesis_is_reproducible_and_shuffles_paragraphs(hotpot_file, embedded_tokenizer):
    questions = load_hotpotqa(hotpot_file)
    first = synthesize_hotpotqa(questions, tokens=2000, tokenizer=embedded_tokenizer, count=3)
    assert first == synthesize_hotpotqa(questions, tokens=2000, tokenizer=embedded_tokenizer, count=3)
    positions = [first[0].document.index(f"Title 0-{p}\n") for p in range(10)]
    assert positions != sorted(positions)


def test_the_closed_book_filter_drops_questions_the_model_already_knows(hotpot_file):
    questions = load_hotpotqa(hotpot_file)[:3]
    model = FakeListChatModel(responses=["\\boxed{Town0}", "\\boxed{no idea}", "I think \\boxed{town2}"])
    assert [q.id for q in closed_book_filter(questions, model)] == ["q1"]


def test_a_file_without_answers_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "hotpot_test_fullwiki_v1.json"
    path.write_text(json.dumps([{"_id": "x", "question": "Q?", "context": []}]))
    with pytest.raises(ConfigError, match="dev-distractor"):
        load_hotpotqa(path)


def test_a_missing_or_malformed_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_hotpotqa(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not a HotpotQA JSON file"):
        load_hotpotqa(tmp_path / "bad.json")


def test_evaluation_reads_synthesized_hotpotqa_documents_and_scores_by_substring(hotpot_file, embedded_tokenizer):
    from memagent_graph.training.eval.evaluation import evaluate

    questions = load_hotpotqa(hotpot_file)
    readers = {"always-town0": lambda question, document: Reading("It is \\boxed{the Town0}")}
    records = evaluate(
        ["hotpotqa"], [1000], samples=2, readers=readers, tokenizer=embedded_tokenizer, hotpotqa=questions
    )
    assert [(r.task, r.sample, r.score) for r in records] == [("hotpotqa", 0, 1.0), ("hotpotqa", 1, 0.0)]


def test_evaluating_hotpotqa_without_its_file_says_which_file_to_give(embedded_tokenizer):
    from memagent_graph.training.eval.evaluation import evaluate

    with pytest.raises(ConfigError, match="hotpot_dev_distractor_v1.json"):
        evaluate(["hotpotqa"], [1000], samples=1, readers={}, tokenizer=embedded_tokenizer)

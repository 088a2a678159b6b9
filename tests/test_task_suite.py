"""Generated long-context tasks: lengths, answers present in the document, seeds, splits, each task's rule."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from memagent_graph.errors import ConfigError
from memagent_graph.training.data.haystacks import SOURCES, kjv_verses
from memagent_graph.training.data.ruler_tasks import RULER_PHRASING
from memagent_graph.training.data.task_suite import TASK_KINDS, generate_tasks, task_seed


# the generated families; realtext's mined tasks (windows of the books, numbers' golds in digits too) are checked in
# test_real_text_tasks.py and test_real_text_family.py
@pytest.mark.parametrize("name", sorted(name for name, kind in TASK_KINDS.items() if not kind.indexed))
def test_every_task_is_about_the_asked_length_with_its_answers_in_the_document(name, embedded_tokenizer):
    [task] = generate_tasks(name, 1, tokens=4096, tokenizer=embedded_tokenizer)
    assert abs(embedded_tokenizer.count(task.document) - 4096) < 0.05 * 4096
    assert task.golds and all(gold in task.document for gold in task.golds)


@pytest.mark.integration
def test_long_documents_reach_a_million_tokens_within_two_percent(embedded_tokenizer):
    [task] = generate_tasks("niah_single_2", 1, tokens=1_000_000, tokenizer=embedded_tokenizer)
    assert abs(embedded_tokenizer.count(task.document) - 1_000_000) < 20_000


def test_the_same_seed_gives_the_same_tasks_and_another_seed_others(embedded_tokenizer):
    first = generate_tasks("niah_multikey_1", 3, tokens=2048, tokenizer=embedded_tokenizer, seed=5)
    again = generate_tasks("niah_multikey_1", 3, tokens=2048, tokenizer=embedded_tokenizer, seed=5)
    other = generate_tasks("niah_multikey_1", 3, tokens=2048, tokenizer=embedded_tokenizer, seed=6)
    assert first == again
    assert [t.golds for t in first] != [t.golds for t in other]


def test_train_and_eval_splits_never_share_seeds_and_train_uses_other_phrasings(embedded_tokenizer):
    train_seeds = {task_seed("two_hop", "train", 0, i) for i in range(1000)}
    assert train_seeds.isdisjoint({task_seed("two_hop", "eval", 0, i) for i in range(1000)})
    train = generate_tasks("niah_single_2", 10, tokens=1024, tokenizer=embedded_tokenizer, split="train")
    ruler_needle = re.compile(RULER_PHRASING.needle.split("{")[0])
    assert not any(ruler_needle.search(task.document) for task in train)
    assert not any("mentioned in the provided text" in task.question for task in train)


def test_an_unknown_task_names_the_known_ones(embedded_tokenizer):
    with pytest.raises(ConfigError, match="niah_single_1"):
        generate_tasks("niah_single_9", 1, tokens=1024, tokenizer=embedded_tokenizer)


def test_multikey_needle_haystack_holds_the_asked_key_once_among_many_needles(embedded_tokenizer):
    [task] = generate_tasks("niah_multikey_2", 1, tokens=4096, tokenizer=embedded_tokenizer)
    key = re.search(r"for (\S+) mentioned", task.question).group(1)
    lines = task.document.split("\n")
    assert sum(key in line for line in lines) == 1
    assert len(lines) > 50 and all(line.startswith("One of the special magic numbers for") for line in lines)


def test_variable_tracking_assignments_come_in_chain_order(embedded_tokenizer):
    [task] = generate_tasks("vt", 1, tokens=4096, tokenizer=embedded_tokenizer)
    positions = [task.document.index(f"VAR {name} =") for name in task.golds]
    assert positions == sorted(positions) and len(task.golds) == 5


def test_common_words_golds_are_the_ten_most_common(embedded_tokenizer):
    [task] = generate_tasks("cwe", 1, tokens=8192, tokenizer=embedded_tokenizer)
    counts = Counter(re.findall(r"\d+\. (\w+)", task.document))
    assert sorted(task.golds) == sorted(word for word, _ in counts.most_common(10))
    assert min(counts[w] for w in task.golds) > max(c for w, c in counts.items() if w not in task.golds)


def test_frequent_words_golds_are_the_three_most_frequent_coded_words(embedded_tokenizer):
    [task] = generate_tasks("fwe", 1, tokens=8192, tokenizer=embedded_tokenizer)
    counts = Counter(word for word in task.document.split() if word != "....")
    assert task.golds == [word for word, _ in counts.most_common(3)]


def test_two_hop_facts_are_far_apart_and_the_link_comes_first(embedded_tokenizer):
    for task in generate_tasks("two_hop", 5, tokens=4096, tokenizer=embedded_tokenizer):
        person = re.search(r"was (.+)'s mentor born", task.question).group(1)
        link = re.search(rf"{person}'s mentor is (.+?)\.", task.document)
        place_fact = task.document.index(f"{link.group(1)} was born in {task.golds[0]}.")
        assert place_fact - link.start() > 0.1 * len(task.document)


def test_the_kjv_haystack_is_the_whole_public_domain_text():
    assert len(kjv_verses()) == 31_103 and kjv_verses()[0].startswith("In the beginning God created")
    assert "public domain" in SOURCES["kjv"]

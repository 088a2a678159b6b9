from memagent_graph.nodes import enforce_memory_budget


def test_memory_within_budget_is_kept(tokenizer):
    memory = enforce_memory_budget("short notes", previous="old", tokenizer=tokenizer, budget=50)
    assert (memory.text, memory.truncated, memory.empty) == ("short notes", False, False)


def test_overlong_memory_is_cut_to_the_budget_by_the_tokenizer(tokenizer):
    reply = " ".join(["information"] * 200)
    memory = enforce_memory_budget(reply, previous="", tokenizer=tokenizer, budget=20)
    assert memory.truncated and memory.tokens <= 20
    assert reply.startswith(memory.text)


def test_empty_reply_keeps_previous_memory(tokenizer):
    memory = enforce_memory_budget("   \n", previous="kept notes", tokenizer=tokenizer, budget=20)
    assert (memory.text, memory.empty) == ("kept notes", True)


def test_reasoning_before_think_end_is_not_memory(tokenizer):
    memory = enforce_memory_budget("<think>plan</think>\nnotes", previous="", tokenizer=tokenizer, budget=20)
    assert memory.text == "notes"

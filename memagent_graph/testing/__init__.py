"""Test doubles for tests, examples and benchmarks; no production module imports this package.

`RuleMemoryModel` (a deterministic rule-following policy) and `train_bpe_tokenizer` (a BPE tokenizer trained on
the spot) live with the training code that also uses them; `simulated_server` is a loopback OpenAI-compatible
server with fault injection.
"""

from memagent_graph.training.rl.tiny_policy import train_bpe_tokenizer
from memagent_graph.training.sft.teachers import FACT_PATTERN, RuleMemoryModel, ScriptedChatModel

__all__ = ["FACT_PATTERN", "RuleMemoryModel", "ScriptedChatModel", "train_bpe_tokenizer"]

"""The three node factories of the MemAgent graph and their helpers."""

from memagent_graph.nodes.answer_extraction import extract_answer, last_boxed
from memagent_graph.nodes.final_answer import final_answer
from memagent_graph.nodes.memory_budget import BudgetedMemory, enforce_memory_budget
from memagent_graph.nodes.memory_policy import MemoryPolicy, MemoryRequest
from memagent_graph.nodes.policy_registry import memory_policy_names, register_memory_policy
from memagent_graph.nodes.read_chunk import read_chunk
from memagent_graph.nodes.update_memory import update_memory

__all__ = [
    "BudgetedMemory",
    "MemoryPolicy",
    "MemoryRequest",
    "enforce_memory_budget",
    "extract_answer",
    "final_answer",
    "last_boxed",
    "memory_policy_names",
    "read_chunk",
    "register_memory_policy",
    "update_memory",
]

"""Training the memory policy from the graph's own traces.

Subpackages, lowest first: `data` (verifiable tasks), `rollout` (recording reads, backends, Ray workers,
weight sync), `sft` (teachers and rejection-sampled warm starts), `rl` (objectives, learner, trainer loop),
`eval` (`memagent eval`); `rewards` (verifiable rewards) is shared by all, `cli` is `memagent train`.
The names below are imported on first use: nothing here imports torch until they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memagent_graph.lazy_exports import lazy_attributes

_EXPORTS = {
    "RLConfig": "memagent_graph.training.rl.config",
    "Trainer": "memagent_graph.training.rl.trainer",
    "LearnerConfig": "memagent_graph.training.rl.learner",
    "get_reward": "memagent_graph.training.rewards",
    "register_reward": "memagent_graph.training.rewards",
    "Task": "memagent_graph.training.data.tasks",
    "needle_tasks": "memagent_graph.training.data.tasks",
    "suite_task": "memagent_graph.training.data.task_suite",
    "load_hotpotqa": "memagent_graph.training.data.hotpotqa",
}

__all__ = [
    "LearnerConfig",
    "RLConfig",
    "Task",
    "Trainer",
    "get_reward",
    "load_hotpotqa",
    "needle_tasks",
    "register_reward",
    "suite_task",
]

if TYPE_CHECKING:
    from memagent_graph.training.data.hotpotqa import load_hotpotqa
    from memagent_graph.training.data.task_suite import suite_task
    from memagent_graph.training.data.tasks import Task, needle_tasks
    from memagent_graph.training.rewards import get_reward, register_reward
    from memagent_graph.training.rl.config import RLConfig
    from memagent_graph.training.rl.learner import LearnerConfig
    from memagent_graph.training.rl.trainer import Trainer

__getattr__ = lazy_attributes(__name__, _EXPORTS)

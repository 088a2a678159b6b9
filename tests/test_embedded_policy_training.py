"""The SmolLM2 adapter recipe (`examples/train_smollm2.yaml`), shrunk to a minute: the real embedded model
imitates oracle traces with LoRA and the run leaves an adapter the embedded engine loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memagent_graph.training.rl.config import RLConfig
from memagent_graph.training.rl.trainer import Trainer

EXAMPLE = Path(__file__).parent.parent / "examples" / "train_smollm2.yaml"

pytestmark = pytest.mark.slow


def test_the_smollm2_recipe_trains_an_adapter_that_the_embedded_engine_loads(tmp_path):
    from safetensors.torch import load_file

    from memagent_graph.integrations.models.embedded_chat import embedded_chat_model

    recipe = RLConfig.from_yaml(EXAMPLE)
    assert recipe.policy == "embedded" and recipe.warm_start.teacher == "oracle" and recipe.lora is not None
    small = recipe.model_copy(
        update={
            "task": recipe.task.model_copy(update={"tokens": 400, "eval_samples": 1}),  # one chunk a document
            "memory_tokens": 64,
            "answer_tokens": 24,
            "warm_start": recipe.warm_start.model_copy(update={"tasks": 2, "steps": 1, "batch_size": 2}),
            "output_dir": str(tmp_path / "run"),
        }
    )
    history = Trainer(small).fit()
    assert history and 0.0 <= history[-1]["eval_reward"] <= 1.0
    adapter = tmp_path / "run" / "adapter"
    trained = load_file(adapter / "adapter_model.safetensors")
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"  # not this machine's cache
    assert any("lora_B" in name and tensor.abs().sum() > 0 for name, tensor in trained.items())
    reply = embedded_chat_model(adapter_path=str(adapter)).invoke("Say hi.", max_tokens=4)
    assert isinstance(reply.content, str)

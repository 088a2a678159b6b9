"""Device choice for training: cuda where asked (or seen, with auto), a clear error where torch sees no GPU,
precision following the device, and a learner that moves everything it owns (checked on the meta device)."""

from __future__ import annotations

import copy

import pytest
import torch

from memagent_graph import precision
from memagent_graph.errors import ConfigError
from memagent_graph.training.rl.config import RLConfig
from memagent_graph.training.rl.learner import LearnerConfig, TorchLearner, pack
from memagent_graph.training.rl.trainer import Trainer, rollout_gpus
from memagent_graph.training.rollout.traces import TraceCall

pytestmark = pytest.mark.unit


@pytest.fixture
def gpu_seen(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


def test_auto_is_the_cpu_where_torch_sees_no_gpu_and_cpu_is_always_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert precision.resolve_device("auto") == "cpu"
    assert precision.resolve_device("cpu") == "cpu"


def test_auto_and_cuda_pick_the_gpu_torch_sees(gpu_seen):
    assert precision.resolve_device("auto") == "cuda"
    assert precision.resolve_device("cuda") == "cuda"
    assert precision.resolve_device("cpu") == "cpu"


def test_asking_for_cuda_without_a_gpu_is_one_line_naming_the_setting(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"device is cuda, but torch sees no GPU .*set it to auto or cpu") as error:
        precision.resolve_device("cuda", what="device")
    assert "\n" not in str(error.value)


def test_a_run_asking_for_cuda_without_a_gpu_fails_before_it_builds_anything(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="device is cuda"):
        Trainer(RLConfig(device="cuda", output_dir=str(tmp_path / "run")))
    assert not (tmp_path / "run" / "base-policy").exists()


def test_bf16_auto_follows_the_gpus_support(monkeypatch):
    for supported in (True, False):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda supported=supported: supported)
        assert precision.resolve_bf16("auto", device="cuda") is supported


def test_rollout_actors_on_cuda_share_the_gpus_ray_gives_them():
    config = RLConfig(rollout_workers=4)
    assert rollout_gpus(config, device="cuda") == 0.25
    assert rollout_gpus(config, device="cpu") == 0.0
    assert rollout_gpus(config.model_copy(update={"ray": False}), device="cuda") == 0.0
    explicit = config.model_copy(update={"rollout": config.rollout.model_copy(update={"gpus_per_worker": 1.0})})
    assert rollout_gpus(explicit, device="cuda") == 1.0


def _tiny_model():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1)  # fmt: skip
    return Qwen2ForCausalLM(config)


def test_a_learner_built_for_a_device_moves_its_policy_and_reference_there():
    model = _tiny_model()
    reference = copy.deepcopy(model)
    learner = TorchLearner(
        model, config=LearnerConfig(kl_coef=0.1, bf16_autocast=False), reference=reference, device="meta"
    )
    owned = [*learner.model.parameters(), *learner.model.buffers(), *learner.reference.parameters()]
    assert owned and all(tensor.device.type == "meta" for tensor in owned)
    optimised = [p for group in learner.optimizer.param_groups for p in group["params"]]
    assert all(p.device.type == "meta" for p in optimised)


def test_a_packed_batch_moves_every_tensor():
    call = TraceCall(
        episode_id="e", group_id="g", call_index=0, node="final_answer", prompt_ids=[1, 2, 3], response_ids=[4, 5],
        logprobs=[-1.0, -2.0], finish_reason="stop", policy_version=0, latency_s=0.0, text="",
    )  # fmt: skip
    packed = pack([call], pad_id=0).to(torch.device("meta"))
    tensors = [packed.input_ids, packed.attention_mask, packed.response_ids, packed.response_mask, packed.old_logprobs]
    assert all(tensor.device.type == "meta" for tensor in tensors)
    assert packed.prompt_lengths == [3]


def test_the_embedded_engine_asked_for_cuda_without_a_gpu_fails_before_loading(monkeypatch, tmp_path):
    from memagent_graph.integrations.models.embedded_chat import LocalChatModel

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    engine = LocalChatModel(model_path=str(tmp_path), device="cuda")._engine
    with pytest.raises(ConfigError, match="device is cuda, but torch sees no GPU"):
        engine.load()
    assert engine.model is None


def test_the_embedded_engines_auto_dtype_follows_its_device(monkeypatch):
    from memagent_graph.integrations.models.embedded_files import resolve_dtype

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: False)
    assert resolve_dtype("auto", device="cuda") == "bfloat16"
    assert resolve_dtype("auto", device="cpu") == "float32"
    assert resolve_dtype("float16", device="cpu") == "float16"

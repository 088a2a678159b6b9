"""A tiny Qwen2 policy and its ChatML BPE tokenizer, built locally in seconds (nothing is downloaded).

For tests and CPU demos of the trainer: the same architecture family as the Qwen2.5 models MemAgent trains,
with a few hundred thousand parameters, randomly initialised from a seed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from memagent_graph.documents.tokenization import HuggingFaceTokenizer
from memagent_graph.prompts import PromptSet

CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

TINY_PROMPTS = PromptSet(
    update="{question}\n<previous_notes>\n{memory}\n</previous_notes>\n<section>\n{section}\n</section>",
    answer="{question}\n<notes>\n{memory}\n</notes>",
    no_memory="none",
)
"""The method's prompts without the instructions: a tiny policy learns the job from traces, not from prose,
and a prompt of a few tokens leaves the chunk budget to the document."""


def build_tiny_policy(folder: str | Path, *, seed: int = 0, vocab_size: int = 1024, hidden_size: int = 64) -> Path:
    """Write a tiny Qwen2 model and a BPE tokenizer (trained on the bundled haystack) to ``folder``."""
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from memagent_graph.documents.haystack import haystack_paragraphs

    folder = Path(folder)
    bpe = train_bpe_tokenizer(haystack_paragraphs()[:400], vocab_size=vocab_size, name="tiny-bpe")
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe.backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        chat_template=CHATML_TEMPLATE,
    )
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def train_bpe_tokenizer(
    texts: Iterable[str], *, vocab_size: int = 2048, name: str = "test-bpe"
) -> HuggingFaceTokenizer:
    """A byte-level BPE tokenizer trained on ``texts`` in well under a second (deterministic)."""
    from tokenizers import Tokenizer as RustTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    backend = RustTokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer=trainer)
    return HuggingFaceTokenizer(backend, name=name)

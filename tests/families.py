"""Tiny random decoders of each mainstream Hugging Face family, built from a config alone (no download): the
architecture matrix's models (`tests/core/test_families.py`) and the folders the command line takes
(`tests/test_family_commands.py`). Vocabulary: SmolLM2's (the tracked tokenizer, data/tokenizers/smollm2), so real
text gives the prompts; the sliding-window families get a window of `WINDOW` positions, far shorter than the
prompts they are tested on. Weights are drawn wide (initializer_range 0.5): the outputs then follow the context
(at HF's 0.02 some families repeat one token whatever the prompt) and the top two logits stand apart (≥ 1e-4 here).
"""
from __future__ import annotations

from pathlib import Path

import torch
import transformers

from spectree.models.random_pairs import tracked_tokenizer

WINDOW = 24  # positions a sliding-window layer sees, itself included
SHAPE = dict(vocab_size=49152, hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
             head_dim=8, max_position_embeddings=1024, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
             pad_token_id=2, initializer_range=0.5)


def _gemma3_kinds(layers: int) -> list[str]:
    """Gemma-3's pattern at a tiny depth: sliding layers with a full one every third (its real one: every sixth)."""
    return ["full_attention" if i % 3 == 2 else "sliding_attention" for i in range(layers)]


FAMILIES = {  # name → (config class, settings beyond SHAPE: a function of the layer count)
    "llama": ("LlamaConfig", lambda n: {}),
    "qwen2": ("Qwen2Config", lambda n: {}),
    "qwen3": ("Qwen3Config", lambda n: {}),
    "mistral": ("MistralConfig", lambda n: {"sliding_window": WINDOW}),
    "gemma2": ("Gemma2Config", lambda n: {"sliding_window": WINDOW, "query_pre_attn_scalar": 8,
                                          "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention"
                                                          for i in range(n)]}),
    "gemma3": ("Gemma3TextConfig", lambda n: {"sliding_window": WINDOW, "query_pre_attn_scalar": 8,
                                              "layer_types": _gemma3_kinds(n)}),
    "phi3": ("Phi3Config", lambda n: {}),
    "olmo2": ("Olmo2Config", lambda n: {}),
    "mixtral": ("MixtralConfig", lambda n: {"num_local_experts": 4, "num_experts_per_tok": 2}),
}
SLIDING = ("mistral", "gemma2", "gemma3")  # the families whose layers attend over a window


def family_config(family: str, layers: int):
    cls, extra = FAMILIES[family]
    return getattr(transformers, cls)(num_hidden_layers=layers, **SHAPE, **extra(layers))


def family_model(family: str, layers: int = 4, seed: int = 0):
    """A random model of `family` with `layers` decoder layers (eval mode, fp32)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(family_config(family, layers)).eval()


def family_folder(root: Path, family: str, layers: int = 4, seed: int = 0, chat: bool = True) -> Path:
    """A model folder of `family` under root/<family>-<layers>-<seed> with the tracked tokenizer (its chat template
    left out when not `chat`: a base checkpoint's)."""
    folder = Path(root) / f"{family}-{layers}-{seed}{'' if chat else '-base'}"
    if not (folder / "config.json").exists():
        family_model(family, layers, seed).save_pretrained(folder)
        tok = tracked_tokenizer()
        if not chat:
            tok.chat_template = None
        tok.save_pretrained(folder)
    return folder


TEXT = ("The river runs past the old mill, where the miller keeps his stones and his cats. Every morning he opens "
        "the gate, counts the sacks of grain, and writes the numbers in a small red book. ")


def prompt_ids(tokens: int, start: int = 0) -> list[int]:
    """About `tokens` token ids of English text (the tracked tokenizer's), from the `start`-th word on."""
    tok = tracked_tokenizer()
    words = (TEXT * 40).split()[start:]
    return tok(" ".join(words)).input_ids[:tokens]

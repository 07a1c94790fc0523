"""Random-weight Llama pairs built on the machine from a config alone: the GPU checklist's models, which need no
download and no model package. A forward's cost depends on the shapes, not on the weights, so the timings are real;
the shapes are SmolLM2-135M's, Llama-3.2-1B's and Llama-3.1-8B's (and a tiny one for CPU tests). The tokenizer is
SmolLM2's, tracked in data/tokenizers/smollm2/ (gzip), for prompts of a realistic length; its ids fit every shape.

Random weights give flat next-token distributions whose top two logits are often closer than bf16's rounding: greedy
decoding would then differ from HF's at "near-ties" all the time. `sharpen_head` scales the output head's rows by
heavy-tailed factors (log-normal), so that the top logit usually stands far above the second and near-ties become
rare; the lossless check still names the rest (`speed.bench.tie_gap`). The draft is a one-layer random Llama of the
target's width (an EAGLE-sized draft: its cost is one decoder layer plus the head), whose agreement with the target
is nil; `mix:λ` over it (`drafts.mix`) gives controlled agreement at a synthetic cost.
"""
from __future__ import annotations

import gzip
from pathlib import Path
from typing import Optional

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerBase

from spectree.core.errors import SpectreeError
from spectree.core.paths import data_dir

# the architectures' own configs (config.json of each release), without their weights
SHAPES: dict[str, dict] = {
    "smollm2-135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, vocab_size=49152, max_position_embeddings=8192, rope_theta=100000.0),
    "llama-3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                         num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072,
                         rope_theta=500000.0),
    "llama-3.1-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                         num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072,
                         rope_theta=500000.0),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=49152, max_position_embeddings=4096, rope_theta=10000.0),
}
TOKENIZER = "smollm2"  # data/tokenizers/<name>/: tokenizer.json.gz and chat_template.jinja
SPECIAL = {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "pad_token": "<|im_end|>",
           "unk_token": "<|endoftext|>"}
HEAD_SPREAD = 1.5  # σ of the log-normal row scales of the output head (`sharpen_head`)


def check_shape(name: str) -> dict:
    if name not in SHAPES:
        raise SpectreeError(f"unknown model shape '{name}': use one of {sorted(SHAPES)}")
    return SHAPES[name]


def tracked_tokenizer(name: str = TOKENIZER) -> PreTrainedTokenizerBase:
    """The tracked tokenizer (its tokenizer.json gzipped, its chat template beside it), without any download."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    folder = data_dir() / "tokenizers" / name
    try:
        text = gzip.decompress((folder / "tokenizer.json.gz").read_bytes()).decode()
        template = (folder / "chat_template.jinja").read_text()
    except (OSError, EOFError) as err:
        raise SpectreeError(f"the tracked tokenizer {folder} is missing or damaged ({err}): restore it with "
                            f"`git checkout -- {folder.relative_to(data_dir().parent)}`") from None
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(text), **SPECIAL)
    tok.chat_template = template
    return tok


def llama_config(shape: str, layers: Optional[int] = None, vocab: Optional[int] = None) -> LlamaConfig:
    """The LlamaConfig of a shape (optionally with `layers` decoder layers or another vocabulary size); untied
    embeddings (the head is sharpened on its own), SDPA attention."""
    spec = dict(check_shape(shape))
    theta = spec.pop("rope_theta")
    spec.update({"num_hidden_layers": layers or spec["num_hidden_layers"], "vocab_size": vocab or spec["vocab_size"]})
    cfg = LlamaConfig(**spec, rope_parameters={"rope_type": "default", "rope_theta": theta}, tie_word_embeddings=False,
                      bos_token_id=1, eos_token_id=2, pad_token_id=2)
    cfg._attn_implementation = "sdpa"
    return cfg


def sharpen_head(model: LlamaForCausalLM, seed: int, spread: float = HEAD_SPREAD) -> None:
    """Scale each row of the output head by exp(spread · z), z ~ N(0, 1) (seeded): a heavy-tailed spread of logit
    scales, so the top logit usually leads the second by far more than rounding (the greedy choice is separated)."""
    weight = model.lm_head.weight
    g = torch.Generator(device="cpu").manual_seed(seed)
    scale = torch.exp(spread * torch.randn(weight.shape[0], generator=g)).to(weight.device, weight.dtype)
    with torch.no_grad():
        weight.mul_(scale[:, None])


def random_llama(shape: str, seed: int, device: str = "cpu", dtype: torch.dtype = torch.float32,
                 layers: Optional[int] = None, vocab: Optional[int] = None, spread: float = HEAD_SPREAD
                 ) -> LlamaForCausalLM:
    """A random-weight Llama of `shape`, initialised on `device` directly (an 8B one takes seconds on a GPU, not
    minutes through the CPU) in `dtype`, its head sharpened by `spread` (0: as initialised); seeded, in eval mode."""
    cfg = llama_config(shape, layers, vocab)
    torch.manual_seed(seed)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # initialise in the target dtype: an 8B model in fp32 first would need 32 GB
    try:
        with torch.device(device):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(default)
    sharpen_head(model, seed, spread)
    return model.eval()


def random_pair(shape: str, device: str = "cpu", dtype: torch.dtype = torch.float32, seed: int = 0
                ) -> tuple[LlamaForCausalLM, LlamaForCausalLM, PreTrainedTokenizerBase]:
    """(target, draft, tokenizer): a random target of `shape`, a one-layer random draft of its width (another
    seed), the tracked tokenizer (whose ids fit every shape's vocabulary)."""
    tok = tracked_tokenizer()
    vocab = check_shape(shape)["vocab_size"]
    if len(tok) > vocab:
        raise SpectreeError(f"shape {shape}'s vocabulary ({vocab}) is smaller than the tokenizer's ({len(tok)})")
    target = random_llama(shape, seed, device, dtype)
    draft = random_llama(shape, seed + 1, device, dtype, layers=1)
    return target, draft, tok


def tokenizer_folder(name: str = TOKENIZER) -> Path:
    return data_dir() / "tokenizers" / name


__all__ = ["SHAPES", "check_shape", "tracked_tokenizer", "llama_config", "sharpen_head", "random_llama",
           "random_pair", "tokenizer_folder"]

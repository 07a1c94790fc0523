"""A tiny random Llama written as an F32 GGUF file, for fast tests of the GGUF loading path.

The file is what llama.cpp's `convert_hf_to_gguf.py` would write for the same weights: llama.cpp
tensor names, q/k rows permuted to its rotary layout (transformers undoes that on load), metadata
under `llama.*`, and a small sentencepiece-style ("llama") vocabulary so that
`AutoTokenizer.from_pretrained(folder, gguf_file=name)` works too. Loading it back with
`AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)` gives a model
whose logits match the returned torch model exactly.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from transformers import LlamaForCausalLM

# Special ids match LlamaConfig's defaults (bos=1, eos=2), since transformers' GGUF loader does not
# copy them from the tokenizer metadata into the llama config.
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
_SPECIALS = ["<unk>", "<s>", "</s>"]
_SP = "\u2581"  # sentencepiece's word boundary
# Pieces after the single characters, in merge order (best first); each is a concatenation of two
# earlier pieces, so merges can be derived from the scores.
_MERGED = [_SP + "t", "th", "he", "in", "er", "an", _SP + "a", _SP + "th", _SP + "the", "on",
           "re", "at", "en", "nd", "es", "or", "is", "ing", _SP + "i", _SP + "o"]
# llama.cpp token types
_NORMAL, _UNKNOWN, _CONTROL = 1, 2, 3


def tiny_vocab(vocab: int) -> list[str]:
    """`vocab` distinct pieces: specials, '▁', a-z, common merges, then padding pieces."""
    chars = [_SP] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens = _SPECIALS + chars + _MERGED
    if vocab < len(_SPECIALS) + len(chars):
        raise ValueError(f"vocab must be at least {len(_SPECIALS) + len(chars)}, got {vocab}")
    tokens = tokens[:vocab]
    tokens += [f"<extra_{i}>" for i in range(vocab - len(tokens))]
    return tokens


def _permute_for_gguf(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's `LlamaModel.permute` for q/k rows (HF rotate-half -> interleaved rotary layout).

    Inverse of transformers' `LlamaTensorProcessor._reverse_permute_weights`, which does
    `reshape(n_head, dim, 2, ...).swapaxes(2, 1)`.
    """
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_tiny_llama_gguf(path: Path, seed: int = 0, vocab: int = 64, hidden: int = 32, layers: int = 2,
                          heads: int = 4, kv_heads: int = 2, inter: int = 64) -> "LlamaForCausalLM":
    """Write a random tiny Llama as F32 GGUF at `path`; return the torch model with the same weights."""
    import gguf
    from transformers import LlamaConfig, LlamaForCausalLM

    path = Path(path)
    head_dim = hidden // heads
    context, eps, rope_theta = 256, 1e-5, 10000.0
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
        max_position_embeddings=context, rms_norm_eps=eps, rope_theta=rope_theta,
        tie_word_embeddings=False, bos_token_id=BOS_ID, eos_token_id=EOS_ID,
    )
    gen = torch.Generator().manual_seed(seed)
    with torch.device("cpu"):
        model = LlamaForCausalLM(config).to(torch.float32).eval()
    with torch.no_grad():  # big enough weights that a wrong layout shows in the logits
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))

    sd = {k: v.detach().cpu().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    tensors = {"token_embd.weight": sd["model.embed_tokens.weight"]}
    for i in range(layers):
        hf = f"model.layers.{i}."
        blk = f"blk.{i}."
        tensors[blk + "attn_norm.weight"] = sd[hf + "input_layernorm.weight"]
        tensors[blk + "attn_q.weight"] = _permute_for_gguf(sd[hf + "self_attn.q_proj.weight"], heads)
        tensors[blk + "attn_k.weight"] = _permute_for_gguf(sd[hf + "self_attn.k_proj.weight"], kv_heads)
        tensors[blk + "attn_v.weight"] = sd[hf + "self_attn.v_proj.weight"]
        tensors[blk + "attn_output.weight"] = sd[hf + "self_attn.o_proj.weight"]
        tensors[blk + "ffn_norm.weight"] = sd[hf + "post_attention_layernorm.weight"]
        tensors[blk + "ffn_gate.weight"] = sd[hf + "mlp.gate_proj.weight"]
        tensors[blk + "ffn_up.weight"] = sd[hf + "mlp.up_proj.weight"]
        tensors[blk + "ffn_down.weight"] = sd[hf + "mlp.down_proj.weight"]
    tensors["output_norm.weight"] = sd["model.norm.weight"]
    tensors["output.weight"] = sd["lm_head.weight"]

    tokens = tiny_vocab(vocab)
    # Higher score = merged earlier; specials and padding pieces score lowest.
    scores = [0.0] * len(_SPECIALS) + [-float(i) for i in range(len(tokens) - len(_SPECIALS))]
    types = [_UNKNOWN, _CONTROL, _CONTROL] + [_NORMAL] * (len(tokens) - len(_SPECIALS))

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_context_length(context)
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(inter)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(eps)
    writer.add_rope_freq_base(rope_theta)
    writer.add_vocab_size(vocab)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_unk_token_id(UNK_ID)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    for name, arr in tensors.items():
        writer.add_tensor(name, np.ascontiguousarray(arr))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return model

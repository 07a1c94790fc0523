"""Draft-training text: ShareGPT windows (`sharegpt_chunks`) and the target's own greedy answers
(self-distillation).

The drafts are scored on the target's greedy output, which is far more predictable than ShareGPT's human
and ChatGPT text the first drafts were trained on. Here the frozen target answers ShareGPT prompts (first
human turns, never MT-bench or HumanEval: those are the held-out sets) greedily, in batches; the chat
prompt plus the answer is one training sequence. Generation is slow on a CPU, so it runs in shards of
`shard` prompts saved atomically under data/cache/train/: an interrupted run resumes at the next shard,
and a later run with more prompts reuses the shards already made. The folder's manifest records what the
answers are made from; shards made from anything else are removed and made again (`target_answers`).
"""
from __future__ import annotations

import io
import random
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from spectree.core.errors import SpectreeError
from spectree.core.manifest import beside, inside, resume_or_restart, reuse_or_rebuild, source_name
from spectree.core.paths import atomic_write_bytes, cache_dir
from spectree.prompts import chat_ids, conversation_text, load_prompts, load_sharegpt_conversations

# prompt sources and their longest prompt (chat template included): function prompts carry a docstring
MAX_PROMPT_TOKENS = {"sharegpt": 160, "pystdlib": 320}
SOURCES = tuple(MAX_PROMPT_TOKENS)


def sharegpt_chunks(tokenizer, seq_len: int, seed: int, n_chunks: int) -> list[list[int]]:
    """`n_chunks` token windows of length seq_len from chat-templated ShareGPT conversations, in an
    order fixed by `seed` (conversations shuffled, each cut into consecutive windows). Tokenising takes
    minutes, so the windows are cached (data/cache/train/, atomic .npy) for the next run or resume. The cache is
    internal and a pure function of its manifest (the settings and the tokenizer's name), so windows made from
    anything else are rebuilt, not refused: that costs minutes and nothing a user named."""
    path = cache_dir() / "train" / f"sharegpt-chunks-{seq_len}-{seed}-{n_chunks}.npy"
    wanted = {"seq_len": seq_len, "seed": seed, "n_chunks": n_chunks, "tokenizer": source_name(tokenizer)}
    return reuse_or_rebuild(beside(path), wanted, lambda: np.load(path).tolist() if path.exists() else None,
                            lambda: _tokenise_sharegpt(tokenizer, seq_len, seed, n_chunks, path))


def _tokenise_sharegpt(tokenizer, seq_len: int, seed: int, n_chunks: int, path: Path) -> list[list[int]]:
    conversations, _ = load_sharegpt_conversations()
    order = list(range(len(conversations)))
    random.Random(seed).shuffle(order)
    chunks: list[list[int]] = []
    for idx in tqdm(order, desc="tokenising ShareGPT", unit="conv", leave=False):
        turns = conversations[idx].get("conversations") or []
        if not turns:
            continue
        try:
            ids = tokenizer(conversation_text(tokenizer, turns), add_special_tokens=False)["input_ids"]
        except SpectreeError:
            continue
        chunks += [ids[i:i + seq_len] for i in range(0, len(ids) - seq_len + 1, seq_len)]
        if len(chunks) >= n_chunks:
            break
    chunks = chunks[:n_chunks]
    buf = io.BytesIO()
    np.save(buf, np.array(chunks, dtype=np.int32).reshape(len(chunks), seq_len))
    atomic_write_bytes(path, buf.getvalue())
    return chunks


def answer_prompts(tokenizer, seed: int, n: int, source: str = "sharegpt") -> list[list[int]]:
    """Chat-templated ids of `n` prompts of `source` (shuffled by `seed`), each at most MAX_PROMPT_TOKENS[source]
    tokens long with the template (longer prompts are skipped, not cut)."""
    if source not in SOURCES:
        raise SpectreeError(f"unknown self-distillation prompt source {source!r}: use one of {SOURCES}")
    prompts, max_prompt_tokens = load_prompts(source), MAX_PROMPT_TOKENS[source]
    order = list(range(len(prompts)))
    random.Random(seed).shuffle(order)
    out: list[list[int]] = []
    for i in order:
        ids = chat_ids(tokenizer, prompts[i].text)
        if len(ids) <= max_prompt_tokens:
            out.append(ids)
            if len(out) == n:
                return out
    raise SpectreeError(f"only {len(out)} {source} prompts fit in {max_prompt_tokens} tokens, {n} requested")


def cached_answer_prompts(folder: Path, tokenizer, seed: int, n: int, source: str) -> list[list[int]]:
    """answer_prompts, kept in `folder`/prompts.npz: the first n prompts of a seed are a prefix of any longer
    list, so a cached list at least n long answers. (The cache also lets a machine without the prompt sources
    — another Python's standard library, no ShareGPT package — generate the answers.)"""
    path = folder / "prompts.npz"
    if path.exists():
        cached = _load_seqs(path)
        if len(cached) >= n:
            return cached[:n]
    prompts = answer_prompts(tokenizer, seed, n, source)
    _save_seqs(path, prompts)
    return prompts


@torch.inference_mode()
def greedy_answers(target, tokenizer, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    """prompt + greedy answer (cut after EOS) for each prompt, generated as one left-padded batch."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=target.device)  # [B, width]
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=target.device)
    out = target.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=False,
                          pad_token_id=pad, eos_token_id=tokenizer.eos_token_id)[:, width:]  # [B, new]
    seqs = []
    for prompt, answer in zip(prompts, out.tolist()):
        if tokenizer.eos_token_id in answer:
            answer = answer[:answer.index(tokenizer.eos_token_id) + 1]
        seqs.append(prompt + answer)
    return seqs


def _shard_path(folder: Path, index: int) -> Path:
    return folder / f"shard-{index:05d}.npz"


def _save_seqs(path: Path, seqs: list[list[int]]) -> None:
    """Token sequences of any lengths as one .npz (a shard of answers, or a prompt list), atomically."""
    buf = io.BytesIO()
    np.savez(buf, tokens=np.concatenate([np.asarray(s, dtype=np.int32) for s in seqs]),
             lengths=np.array([len(s) for s in seqs], dtype=np.int32))
    atomic_write_bytes(path, buf.getvalue())


def _load_seqs(path: Path) -> list[list[int]]:
    with np.load(path) as z:
        tokens, lengths = z["tokens"], z["lengths"]
    return [s.tolist() for s in np.split(tokens, np.cumsum(lengths)[:-1])]


def target_answers(target, tokenizer, n_prompts: int, max_new_tokens: int = 256, seed: int = 0,
                   batch: int = 16, shard: int = 64, source: str = "sharegpt") -> list[list[int]]:
    """`n_prompts` sequences (chat prompt + the target's greedy answer), generated shard by shard and cached."""
    if min(n_prompts, max_new_tokens, batch, shard) < 1:
        raise SpectreeError("n_prompts, max_new_tokens, batch and shard must all be >= 1")
    shard = max(shard, batch)  # a generation batch never spans two shards
    tag = "" if source == "sharegpt" else f"{source}-"  # ShareGPT keeps the folder name of earlier runs
    folder = cache_dir() / "train" / f"self-answers-{tag}{max_new_tokens}-{seed}-{shard}"
    _check_answers(folder, {"source": source, "max_new_tokens": max_new_tokens, "seed": seed, "shard": shard,
                            "batch": batch, "target": source_name(target)})
    prompts = cached_answer_prompts(folder, tokenizer, seed, n_prompts, source)
    seqs: list[list[int]] = []
    n_shards = -(-n_prompts // shard)
    for index in tqdm(range(n_shards), desc=f"target answers ({source})", unit="shard"):
        path = _shard_path(folder, index)
        if not path.exists():
            part = prompts[index * shard:(index + 1) * shard]
            part = sorted(part, key=len)  # similar lengths per batch: less padding
            done = [s for i in range(0, len(part), batch)
                    for s in greedy_answers(target, tokenizer, part[i:i + batch], max_new_tokens)]
            _save_seqs(path, done)
        seqs += _load_seqs(path)
    return seqs[:n_prompts]


def _check_answers(folder: Path, wanted: dict) -> None:
    """Keep the shards of `folder` only if they were made from `wanted`. The folder name fixes the source, length,
    seed and shard size, not the generation batch (batched greedy depends on it) nor the target; the folder is an
    internal cache fully determined by its manifest and answers made otherwise cannot serve this run, so they are
    removed and made again rather than refused. Shards from before manifests are kept: regenerating them takes
    hours, and they were only ever made with the settings their folder name gives."""
    made = sorted(folder.glob("shard-*.npz")) + sorted(folder.glob("prompts.npz"))

    def clear():
        for path in made:
            path.unlink()

    resume_or_restart(inside(folder), wanted, clear, legacy=wanted if made else None)


def pack(seqs: list[list[int]], seq_len: int, seed: int) -> list[list[int]]:
    """Sequences shuffled by `seed`, concatenated and cut into windows of `seq_len` tokens (the tail that
    does not fill a window is dropped)."""
    order = list(range(len(seqs)))
    random.Random(seed).shuffle(order)
    stream = [t for i in order for t in seqs[i]]
    return [stream[i:i + seq_len] for i in range(0, len(stream) - seq_len + 1, seq_len)]


def token_ranking(windows: list[list[int]], vocab_size: int) -> np.ndarray:
    """int32 [vocab_size]: token ids by decreasing frequency in `windows` (ties by id) — the first V' are
    the reduced draft vocabulary (edd.ReducedHead)."""
    counts = np.bincount(np.concatenate([np.asarray(w, dtype=np.int64) for w in windows]), minlength=vocab_size)
    return np.lexsort((np.arange(vocab_size), -counts)).astype(np.int32)


__all__ = ["sharegpt_chunks", "answer_prompts", "cached_answer_prompts", "greedy_answers", "target_answers", "pack",
           "token_ranking"]

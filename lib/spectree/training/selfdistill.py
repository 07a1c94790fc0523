"""Draft-training text: ShareGPT windows (`sharegpt_chunks`) and the target's own greedy answers
(self-distillation).

The drafts are scored on the target's greedy output, which is far more predictable than ShareGPT's human
and ChatGPT text the first drafts were trained on. Here the frozen target answers ShareGPT prompts (first
human turns, never MT-bench or HumanEval: those are the held-out sets) greedily, in batches; the chat
prompt plus the answer is one training sequence. Text goes in as decoding feeds prompts (`prompts.chat_ids`):
through the chat template, or as raw text where the target's tokenizer has none (a base model,
`prompts.uses_chat`). Generation is slow on a CPU, so it runs in shards of `shard` prompts saved atomically
under data/cache/train/: an interrupted run resumes at the next shard, and a later run with more prompts
reuses the shards already made. The folder's manifest records what the answers are made from; shards made
from anything else are removed and made again (`target_answers`).

Which prompts a run trained on is recorded too (`training.provenance`): the ShareGPT record ids of the conversations
its windows came from (`sharegpt_window_sources`) and the ids of the prompts the target answered
(`answer_prompt_keys`; kept in the prompt cache beside the token ids).
"""
from __future__ import annotations

import io
import json
import random
from itertools import islice
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import torch
from tqdm.auto import tqdm

from spectree.core.errors import SpectreeError
from spectree.core.manifest import (beside, inside, matches, resume_or_restart, reuse_or_rebuild, source_name,
                                    write_manifest)
from spectree.core.paths import atomic_write_bytes, atomic_write_npy, atomic_write_text, cache_dir
from spectree.prompts import chat_ids, conversation_text, load_prompts, load_sharegpt_conversations, uses_chat

# prompt sources and their longest prompt (chat template included): function prompts carry a docstring
MAX_PROMPT_TOKENS = {"sharegpt": 160, "pystdlib": 320}
SOURCES = tuple(MAX_PROMPT_TOKENS)


def sharegpt_chunks(tokenizer, seq_len: int, seed: int, n_chunks: int) -> list[list[int]]:
    """`n_chunks` token windows of length seq_len from ShareGPT conversations (`conversation_ids`), in an
    order fixed by `seed` (conversations shuffled, each cut into consecutive windows). Tokenising takes
    minutes, so the windows are cached (data/cache/train/, atomic .npy, with the record id of each window's
    conversation beside them) for the next run or resume. The cache is internal and a pure function of its
    manifest (the settings and the tokenizer's name), so windows made from anything else are rebuilt, not refused:
    that costs minutes and nothing a user named."""
    path = _chunks_path(seq_len, seed, n_chunks)
    return reuse_or_rebuild(beside(path), _chunks_manifest(tokenizer, seq_len, seed, n_chunks),
                            lambda: np.load(path).tolist() if path.exists() else None,
                            lambda: _tokenise_sharegpt(tokenizer, seq_len, seed, n_chunks, path))


def sharegpt_window_sources(tokenizer, seq_len: int, seed: int, n_chunks: int) -> list[str]:
    """The ShareGPT record id of the conversation each of the first `n_chunks` windows of `sharegpt_chunks` comes
    from (one per window, in training order): read from beside any cached window list of this seed at least that
    long (its windows start with these), else found by tokenising again (minutes; only when a draft is exported or
    its card's prompts are recomputed, `training.provenance`)."""
    for path in sorted(cache_dir().glob(f"train/sharegpt-chunks-{seq_len}-{seed}-*.sources.json")):
        made = int(path.name.removesuffix(".sources.json").rsplit("-", 1)[1])
        if made >= n_chunks and matches(beside(path), _chunks_manifest(tokenizer, seq_len, seed, made)):
            return _read_sources(path)[:n_chunks]
    path = _sources_path(_chunks_path(seq_len, seed, n_chunks))
    return reuse_or_rebuild(beside(path), _chunks_manifest(tokenizer, seq_len, seed, n_chunks),
                            lambda: None, lambda: _write_sources(path, [i for i, _ in islice(
                                _sharegpt_windows(tokenizer, seq_len, seed), n_chunks)]))


def _chunks_path(seq_len: int, seed: int, n_chunks: int) -> Path:
    return cache_dir() / "train" / f"sharegpt-chunks-{seq_len}-{seed}-{n_chunks}.npy"


def _chunks_manifest(tokenizer, seq_len: int, seed: int, n_chunks: int) -> dict:
    return {"seq_len": seq_len, "seed": seed, "n_chunks": n_chunks, "tokenizer": source_name(tokenizer),
            **_raw_mark(tokenizer)}


def _raw_mark(tokenizer) -> dict:
    """What a cache's manifest adds when its text went in raw (`uses_chat`): nothing for the chat template, so the
    manifests of caches made before raw text stay as they were."""
    return {} if uses_chat(tokenizer) else {"text": "raw"}


def _sources_path(chunks: Path) -> Path:
    return chunks.with_name(chunks.stem + ".sources.json")


def _write_sources(path: Path, ids: list[str]) -> list[str]:
    """Record ids, one per window, stored run-length encoded ([[id, windows], ...]: a conversation's windows are
    consecutive)."""
    runs: list[list] = []
    for i in ids:
        if runs and runs[-1][0] == i:
            runs[-1][1] += 1
        else:
            runs.append([i, 1])
    atomic_write_text(path, json.dumps(runs))
    return ids


def _read_sources(path: Path) -> list[str]:
    return [i for i, count in json.loads(path.read_text()) for _ in range(count)]


def conversation_ids(tokenizer, turns: list[dict], chat: bool) -> list[int]:
    """Token ids of a ShareGPT conversation: rendered by the chat template (`chat`; a role the template does not
    know is refused), else each turn's text as decoding feeds a prompt without one (`chat_ids`: the raw text, BOS as
    the tokenizer adds it), one after the other."""
    if chat:
        return tokenizer(conversation_text(tokenizer, turns), add_special_tokens=False)["input_ids"]
    return [t for turn in turns for t in chat_ids(tokenizer, turn.get("value", ""))]


def _sharegpt_windows(tokenizer, seq_len: int, seed: int) -> Iterator[tuple[str, list[int]]]:
    """(record id, window) over the ShareGPT conversations (`conversation_ids`) in `seed`'s order, each conversation
    cut into consecutive windows of seq_len tokens (its tail dropped; records without turns or with a role the
    template does not know are skipped)."""
    chat = uses_chat(tokenizer)
    conversations, _ = load_sharegpt_conversations()
    order = list(range(len(conversations)))
    random.Random(seed).shuffle(order)
    for idx in tqdm(order, desc="tokenising ShareGPT", unit="conv", leave=False):
        turns = conversations[idx].get("conversations") or []
        if not turns:
            continue
        try:
            ids = conversation_ids(tokenizer, turns, chat)
        except SpectreeError:
            continue
        for i in range(0, len(ids) - seq_len + 1, seq_len):
            yield str(conversations[idx].get("id")), ids[i:i + seq_len]


def _tokenise_sharegpt(tokenizer, seq_len: int, seed: int, n_chunks: int, path: Path) -> list[list[int]]:
    made = list(islice(_sharegpt_windows(tokenizer, seq_len, seed), n_chunks))
    chunks = [w for _, w in made]
    atomic_write_npy(path, np.array(chunks, dtype=np.int32).reshape(len(chunks), seq_len))
    sources = _sources_path(path)
    write_manifest(beside(sources), _chunks_manifest(tokenizer, seq_len, seed, n_chunks))
    _write_sources(sources, [i for i, _ in made])
    return chunks


def _fitting_prompts(tokenizer, seed: int, source: str) -> Iterator[tuple[str, list[int]]]:
    """(prompt id, chat-templated ids) of `source`'s prompts in `seed`'s order, those at most
    MAX_PROMPT_TOKENS[source] tokens long with the template (longer prompts are skipped, not cut)."""
    if source not in SOURCES:
        raise SpectreeError(f"unknown self-distillation prompt source {source!r}: use one of {SOURCES}")
    prompts, max_prompt_tokens = load_prompts(source), MAX_PROMPT_TOKENS[source]
    order = list(range(len(prompts)))
    random.Random(seed).shuffle(order)
    for i in order:
        ids = chat_ids(tokenizer, prompts[i].text)
        if len(ids) <= max_prompt_tokens:
            yield prompts[i].id, ids


def _answer_selection(tokenizer, seed: int, n: int, source: str) -> tuple[list[str], list[list[int]]]:
    """(prompt ids, chat-templated ids) of the first `n` fitting prompts (`_fitting_prompts`)."""
    chosen = list(islice(_fitting_prompts(tokenizer, seed, source), n))
    if len(chosen) < n:
        raise SpectreeError(f"only {len(chosen)} {source} prompts fit in {MAX_PROMPT_TOKENS[source]} tokens, "
                            f"{n} requested")
    return [k for k, _ in chosen], [ids for _, ids in chosen]


def answer_prompts(tokenizer, seed: int, n: int, source: str = "sharegpt") -> list[list[int]]:
    """Chat-templated ids of `n` prompts of `source` (shuffled by `seed`), each at most MAX_PROMPT_TOKENS[source]
    tokens long with the template (longer prompts are skipped, not cut)."""
    return _answer_selection(tokenizer, seed, n, source)[1]


def cached_answer_prompts(folder: Path, tokenizer, seed: int, n: int, source: str) -> list[list[int]]:
    """answer_prompts, kept in `folder`/prompts.npz (with the prompts' ids): the first n prompts of a seed are a
    prefix of any longer list, so a cached list at least n long answers. (The cache also lets a machine without the
    prompt sources — another Python's standard library, no ShareGPT package — generate the answers.)"""
    path = folder / "prompts.npz"
    if path.exists():
        cached = _load_seqs(path)
        if len(cached) >= n:
            return cached[:n]
    keys, prompts = _answer_selection(tokenizer, seed, n, source)
    _save_seqs(path, prompts, keys)
    return prompts


def answer_prompt_keys(tokenizer, seed: int, n: int, source: str, max_new_tokens: int = 256, batch: int = 16,
                       shard: int = 64) -> list[str]:
    """The ids of the `n` prompts `target_answers` answers with these settings: from its prompt cache when that
    records them, else drawn again from the source (`_answer_selection`: the same seeded order and length rule) —
    refused when a cache made before ids were kept holds other token ids than the source gives here (drawn on a
    machine with another standard library, say)."""
    path = answers_folder(source, max_new_tokens, seed, max(shard, batch)) / "prompts.npz"
    cached: list[list[int]] = []
    if path.exists():
        with np.load(path) as z:
            keys = z["keys"].tolist() if "keys" in z.files else []
        if len(keys) >= n:
            return keys[:n]
        cached = _load_seqs(path)[:n]
    keys, ids = _answer_selection(tokenizer, seed, n, source)
    if cached and cached != ids[:len(cached)]:
        raise SpectreeError(f"{path} holds other {source} prompts than this machine draws for seed {seed}: their ids "
                            f"cannot be told here")
    return keys


def answers_folder(source: str, max_new_tokens: int, seed: int, shard: int) -> Path:
    """Where `target_answers` keeps its shards and prompt cache."""
    tag = "" if source == "sharegpt" else f"{source}-"  # ShareGPT keeps the folder name of earlier runs
    return cache_dir() / "train" / f"self-answers-{tag}{max_new_tokens}-{seed}-{shard}"


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


def _save_seqs(path: Path, seqs: list[list[int]], keys: Optional[list[str]] = None) -> None:
    """Token sequences of any lengths as one .npz (a shard of answers, or a prompt list with its prompts' `keys`),
    atomically."""
    buf = io.BytesIO()
    np.savez(buf, tokens=np.concatenate([np.asarray(s, dtype=np.int32) for s in seqs]),
             lengths=np.array([len(s) for s in seqs], dtype=np.int32), **({"keys": np.array(keys)} if keys else {}))
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
    folder = answers_folder(source, max_new_tokens, seed, shard)
    _check_answers(folder, {"source": source, "max_new_tokens": max_new_tokens, "seed": seed, "shard": shard,
                            "batch": batch, "target": source_name(target), **_raw_mark(tokenizer)})
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


__all__ = ["sharegpt_chunks", "sharegpt_window_sources", "conversation_ids", "answer_prompts", "answer_prompt_keys", "cached_answer_prompts",
           "answers_folder", "greedy_answers", "target_answers", "pack", "token_ranking"]

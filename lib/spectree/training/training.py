"""Distilling a one-layer draft (EDD or VDM) from the frozen target, on ShareGPT text or on the target's
own greedy answers to ShareGPT prompts (`data="self"`, see selfdistill.py). The text goes in as decoding feeds
prompts: through the target's chat template, or as raw text where its tokenizer has none (a base model), said once.

Resumable: the full training state (draft layer, optimizer, step, loss log) is saved atomically every
`save_every_s` seconds and on Ctrl-C / SIGTERM under data/cache/train/<name>/, and the data order is a pure
function of the seed, so an interrupted run — even in a later session — continues exactly where it stopped.
That folder's manifest records the settings it was made with; a run asking for others under the same name is
refused (`check_resume`), so a resumed state and its exported card always describe the same training.
"""
from __future__ import annotations

import io
import json
import random
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from spectree.core.errors import SpectreeError
from spectree.core.interrupts import Deferred
from spectree.core.manifest import resume_or_refuse, source_name
from spectree.core.paths import (
    artifact_path,
    atomic_write_bytes,
    atomic_write_npy,
    cache_dir,
    check_name,
)
from spectree.core.treeattn import additive_mask
from spectree.drafts.edd import (
    FusedEmbedding,
    add_fusion,
    block_starts,
    default_hidden_layer,
    dual_block_allowed,
    one_layer_draft,
    soft_prompt,
)
from spectree.training.selfdistill import pack, sharegpt_chunks, target_answers, token_ranking
from spectree.prompts import say_raw, uses_chat

KINDS = ("edd", "vdm")
DATA = ("sharegpt", "self")
LOSSES = ("kl", "ce")  # KL to the target's distribution, or cross-entropy on the text (an ablation)
SAVE_EVERY_S = 180.0  # seconds between training checkpoints (one is also saved on Ctrl-C / SIGTERM)


@dataclass(frozen=True)
class TrainConfig:
    kind: str = "edd"  # "edd" (soft prompt of target hidden states) or "vdm" (tokens only)
    loss: str = "kl"  # "kl" = KL(P_target || P_draft); "ce" = cross-entropy on the text (ablation)
    hidden_layer: int = -1  # hidden_states index fed to EDD; -1 = the 4th-to-last layer
    hidden_norm: bool = False  # pass the soft-prompt hidden states through the target's final norm (see edd.soft_prompt)
    fuse: bool = False  # EDD: also add a projection of norm(h_{s-1}) to every draft token's embedding (edd.FusedEmbedding)
    block_min: int = 5  # dual-block length drawn from [block_min, block_max] at every step
    block_max: int = 10
    root_weight: float = 1.0  # loss weight of each block's first token (draft position 1, where h_{s-1} is freshest)
    seq_len: int = 256
    batch: int = 4
    lr: float = 3e-4
    warmup: int = 50
    decay: int = 0  # the last `decay` steps lower the learning rate linearly to 0 (warmup-stable-decay); 0: constant
    steps: int = 2000
    seed: int = 0
    data: str = "sharegpt"  # "sharegpt" (conversations) or "self" (the target's greedy answers to ShareGPT prompts)
    self_prompts: int = 768  # data="self": ShareGPT prompts answered (cycled over epochs if steps need more windows)
    self_code_prompts: int = 0  # data="self": also answer this many standard-library functions to complete (HumanEval's format)
    self_max_new: int = 256  # data="self": answer length cap
    self_batch: int = 32  # data="self": generation batch (batched greedy is fixed by it, so part of the recipe)
    teacher_topk: int = 0  # 0: full teacher logits every step; k > 0: KL on the teacher's top-k, cached per window

    def __post_init__(self):
        if self.kind not in KINDS:
            raise SpectreeError(f"unknown draft kind '{self.kind}': use one of {KINDS}")
        if self.loss not in LOSSES:
            raise SpectreeError(f"unknown loss '{self.loss}': use one of {LOSSES}")
        if self.data not in DATA:
            raise SpectreeError(f"unknown training data '{self.data}': use one of {DATA}")
        if not 1 <= self.block_min <= self.block_max:
            raise SpectreeError(f"need 1 <= block_min <= block_max, got {self.block_min}, {self.block_max}")
        for key in ("seq_len", "batch", "warmup", "decay", "steps", "self_prompts", "self_code_prompts", "self_max_new", "self_batch", "teacher_topk",
                    "root_weight"):
            if not 0 <= getattr(self, key) < float("inf"):  # NaN and inf too
                raise SpectreeError(f"{key} must be >= 0, got {getattr(self, key)}")
        if not 0 < self.lr < float("inf"):
            raise SpectreeError(f"lr must be a positive number, got {self.lr}")


def training_windows(target, tokenizer, cfg: TrainConfig) -> list[list[int]]:
    """The cfg.steps * cfg.batch token windows of a run, in training order (a pure function of the config).
    Self-distilled data is smaller than a long run needs: its packed windows are repeated in epochs, each
    epoch in its own seeded order."""
    n = cfg.steps * cfg.batch
    if cfg.data == "sharegpt":
        return sharegpt_chunks(tokenizer, cfg.seq_len, cfg.seed, n)
    seqs = target_answers(target, tokenizer, cfg.self_prompts, cfg.self_max_new, cfg.seed, cfg.self_batch)
    if cfg.self_code_prompts:
        seqs += target_answers(target, tokenizer, cfg.self_code_prompts, cfg.self_max_new, cfg.seed, cfg.self_batch,
                               source="pystdlib")
    windows = pack(seqs, cfg.seq_len, cfg.seed)
    if not windows:
        raise SpectreeError(f"the self-distilled data holds less than one window of {cfg.seq_len} tokens")
    out: list[list[int]] = []
    for epoch in range(-(-n // len(windows))):
        order = list(range(len(windows)))
        random.Random(cfg.seed + epoch).shuffle(order)
        out += [windows[i] for i in order]
    return out[:n]


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """The learning rate of (0-based) `step`: linear warmup over cfg.warmup steps, constant, then a linear decay
    to 0 over the last cfg.decay steps of cfg.steps (the step after the last one would get 0)."""
    warm = min(1.0, (step + 1) / cfg.warmup) if cfg.warmup else 1.0
    cool = min(1.0, (cfg.steps - step) / cfg.decay) if cfg.decay else 1.0
    return cfg.lr * warm * cool


def data_description(cfg: TrainConfig, raw: bool = False) -> str:
    """The card's `data`: what the text was, and (`raw`) that it went in as raw text, not through the chat template."""
    if cfg.data == "sharegpt":
        return "ShareGPT V3 (complete records)" + (", raw text" if raw else "")
    code = f" and {cfg.self_code_prompts} standard-library functions to complete" if cfg.self_code_prompts else ""
    return (f"the target's greedy answers (≤ {cfg.self_max_new} tokens) to {cfg.self_prompts} ShareGPT first turns{code}, "
            f"{'raw text' if raw else 'chat template'}")


def draft_logits(draft, target, tokens: torch.Tensor, cfg: TrainConfig, hidden: Optional[torch.Tensor],
                 block: int, offset: int) -> torch.Tensor:
    """Teacher-forced draft logits [B, T, V] at every token position (hidden: raw target states [B, T, H])."""
    if cfg.kind == "vdm":
        return draft(input_ids=tokens).logits
    b, t = tokens.shape
    embed = draft.model.embed_tokens
    if isinstance(embed, FusedEmbedding):  # token i reads h_{s-1}, s its block start (zeros before the text)
        newest = torch.cat([torch.zeros_like(hidden[:, :1]), hidden], dim=1)  # [B, T+1, H]: index s = h_{s-1}
        embed.context = newest[:, block_starts(t, block, offset)]  # [B, T, H]
    x = torch.cat([soft_prompt(draft, hidden, cfg.hidden_norm), embed(tokens)], dim=1)  # [B, 2T, H]
    pos = torch.cat([torch.arange(t), torch.arange(t)])[None].expand(b, 2 * t).to(tokens.device)
    mask = additive_mask(dual_block_allowed(t, block, offset), x.dtype).to(tokens.device)
    h = draft.model(inputs_embeds=x, attention_mask=mask.expand(b, 1, 2 * t, 2 * t), position_ids=pos).last_hidden_state
    return draft.lm_head(h[:, t:])  # token entries only


def position_weights(t: int, block: int, offset: int, root_weight: float) -> torch.Tensor:
    """float [t]: each token's loss weight, `root_weight` for the first token of its dual block (draft
    position 1) and 1 elsewhere, scaled to mean 1 so the loss stays on the scale of a plain mean."""
    w = 1.0 + (root_weight - 1.0) * (torch.arange(t) == block_starts(t, block, offset)).float()
    return w / w.mean()


def loss_fn(logits: torch.Tensor, tokens: torch.Tensor, teacher, loss: str,
            weights: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Weighted mean per-token loss of draft logits [B, T, V] (`weights` [T], default all 1). `teacher`: the
    target's logits [B, T, V], or its top-k (log-probs [B, T, k], ids [B, T, k]) whose KL term ignores the
    tail (for a peaked target, ~no mass)."""
    logp = F.log_softmax(logits.float(), dim=-1)
    w = torch.ones(tokens.shape[1], device=logits.device) if weights is None else weights.to(logits.device)
    if loss == "ce":  # next-token cross-entropy on the text
        nll = -logp[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0]  # [B, T-1]
        return (nll * w[:-1]).sum() / (w[:-1].sum() * tokens.shape[0])
    if isinstance(teacher, tuple):
        top_logq, top_ids = teacher
        kl = (top_logq.exp() * (top_logq - logp.gather(-1, top_ids))).sum(-1)  # [B, T]
    else:
        logq = F.log_softmax(teacher.float(), dim=-1)
        kl = (logq.exp() * (logq - logp)).sum(-1)  # [B, T]
    return (kl * w).mean()


class Teacher:
    """The frozen target's outputs for a batch of windows: the EDD hidden states and the logits (full), or,
    with `topk`, fp16 hidden states and top-k log-probs cached per window, so later epochs skip the target."""

    def __init__(self, target, layer: Optional[int], topk: int):
        self.target, self.layer, self.topk, self.cache = target, layer, topk, {}

    @torch.no_grad()
    def _run(self, tokens: torch.Tensor):
        out = self.target(input_ids=tokens, output_hidden_states=self.layer is not None)
        hidden = out.hidden_states[self.layer] if self.layer is not None else None
        if not self.topk:
            return hidden, out.logits
        top = F.log_softmax(out.logits.float(), dim=-1).topk(self.topk, dim=-1)
        return (None if hidden is None else hidden.half()), (top.values.half(), top.indices.int())

    def __call__(self, tokens: torch.Tensor):
        """(hidden [B, T, H] or None, teacher for loss_fn)."""
        if not self.topk:
            return self._run(tokens)
        keys = [row.numpy().tobytes() for row in tokens.cpu()]
        missing = [i for i, k in enumerate(keys) if k not in self.cache]
        if missing:
            hidden, (logq, ids) = self._run(tokens[missing])
            for j, i in enumerate(missing):
                self.cache[keys[i]] = (None if hidden is None else hidden[j], logq[j], ids[j])
        rows = [self.cache[k] for k in keys]
        hidden = None if self.layer is None else torch.stack([r[0] for r in rows]).float()  # [B, T, H]
        return hidden, (torch.stack([r[1] for r in rows]).float(), torch.stack([r[2] for r in rows]).long())


def _state_bytes(payload: dict) -> bytes:
    buf = io.BytesIO()
    torch.save(payload, buf)
    return buf.getvalue()


def run_record(cfg: TrainConfig, target: str) -> dict:
    """What a training state is made from: the config and the target's name. `steps` counts only with a decay:
    without one the data order, block lengths and learning rates of the first s steps are those of any run of
    s steps or more, so a run may be extended (or repeated shorter, docs/training.md) under its name."""
    record = {**asdict(cfg), "target": target}
    if not cfg.decay:
        del record["steps"]
    return record


def check_resume(name: str, cfg: TrainConfig, target: str, restart: bool = False) -> Path:
    """data/cache/train/<name>, checked before any model loads: a state made with other settings (`run_record`)
    is refused in one line naming them, unless `restart` removes it; before a state exists, this run's settings
    are recorded."""
    work = cache_dir() / "train" / check_name(name, "draft")
    if restart:
        (work / "state.pt").unlink(missing_ok=True)
    resume_or_refuse(work, run_record(cfg, target), (work / "state.pt").exists(),
                     "pass --restart to start over, or another --name", legacy=_legacy_record(work, target))
    return work


def _legacy_record(work: Path, target: str) -> Optional[dict]:
    """What a state saved before manifests was made with: its config.json (then rewritten by every run, the
    best record there is), fields added since at their defaults; its target was not recorded."""
    if not (work / "config.json").exists():
        return None
    known = {f.name for f in fields(TrainConfig)}
    saved = {k: v for k, v in json.loads((work / "config.json").read_text()).items() if k in known}
    return run_record(TrainConfig(**saved), target)


def train(name: str, cfg: TrainConfig, target, tokenizer, save_every_s: float = SAVE_EVERY_S,
          max_minutes: Optional[float] = None, fresh: bool = False, init_from: Optional[Path] = None,
          init_step: int = 0, target_name: Optional[str] = None) -> Path:
    """Train (or resume, unless `fresh`) draft `name`; returns the training-state folder. Stops after
    cfg.steps or max_minutes (checkpointing first); on Ctrl-C or SIGTERM it finishes the step, checkpoints and
    raises `Interrupted`. A state made with other settings is refused (`check_resume`; `target_name` defaults
    to the name the target was loaded by). Without a saved state, `init_from` (a shipped
    checkpoint, e.g. on a new machine) gives the starting layer and `init_step` the step it had reached,
    so the data order continues where that run stopped (the optimizer state starts afresh)."""
    work = check_resume(name, cfg, source_name(target) if target_name is None else target_name, restart=fresh)
    layer = default_hidden_layer(target) if cfg.hidden_layer < 0 else cfg.hidden_layer
    torch.manual_seed(cfg.seed)
    if target.device.type == "cuda":  # TF32 matmuls: teacher, answers and draft ~several times faster than fp32
        torch.set_float32_matmul_precision("high")
    draft = one_layer_draft(target).train()
    for p in target.parameters():
        p.requires_grad_(False)
    fused = add_fusion(draft) if cfg.fuse and cfg.kind == "edd" else None
    params = list(draft.model.layers[0].parameters()) + (list(fused.fuse.parameters()) if fused else [])
    opt = torch.optim.AdamW(params, lr=cfg.lr)
    state_path, log = work / "state.pt", []
    raw = not uses_chat(tokenizer)  # the text goes in as decoding feeds prompts (`prompts.chat_ids`)
    if raw:
        say_raw()
    step, wall, init = 0, 0.0, None
    if state_path.exists():
        state = torch.load(state_path, weights_only=True)
        draft.model.layers[0].load_state_dict(state["layer"])
        if fused:
            fused.fuse.load_state_dict(state["fuse"])
        opt.load_state_dict(state["optim"])
        step, wall, log, init = state["step"], state["wall"], state["log"], state.get("init")
    elif init_from is not None:
        from safetensors.torch import load_file

        shipped = load_file(str(init_from))
        draft.model.layers[0].load_state_dict({k.removeprefix("layer."): v.float() for k, v in shipped.items()
                                               if k.startswith("layer.")})
        if fused and "fuse.weight" in shipped:  # else the fusion starts at zero: the shipped draft's function
            fused.fuse.weight.data.copy_(shipped["fuse.weight"].float())
        step, init = init_step, {"from": Path(init_from).name, "step": init_step}

    def save():
        payload = {"layer": draft.model.layers[0].state_dict(), "hidden_layer": layer, "optim": opt.state_dict(),
                   "step": step, "wall": wall, "log": log, "init": init, "raw": raw,
                   **({"fuse": fused.fuse.state_dict()} if fused else {})}
        atomic_write_bytes(state_path, _state_bytes(payload))

    chunks = training_windows(target, tokenizer, cfg)
    atomic_write_npy(work / "vocab.npy", token_ranking(chunks, target.config.vocab_size))
    teacher = Teacher(target, layer if cfg.kind == "edd" else None, cfg.teacher_topk)
    rng = random.Random(cfg.seed)
    blocks = [(rng.randint(cfg.block_min, cfg.block_max), rng.randrange(cfg.block_max)) for _ in range(cfg.steps)]
    start, last_save = time.perf_counter(), time.perf_counter()
    with Deferred() as stop, tqdm(total=cfg.steps, initial=step, desc=f"train {name}", unit="step") as bar:
        while step < cfg.steps:
            t0 = time.perf_counter()
            tokens = torch.tensor(chunks[step * cfg.batch:(step + 1) * cfg.batch], device=target.device)
            hidden, teacher_out = teacher(tokens)
            for g in opt.param_groups:
                g["lr"] = learning_rate(cfg, step)
            block, offset = blocks[step]
            weights = position_weights(tokens.shape[1], block, offset, cfg.root_weight) if cfg.kind == "edd" else None
            logits = draft_logits(draft, target, tokens, cfg, hidden, block, offset)
            loss = loss_fn(logits, tokens, teacher_out, cfg.loss, weights)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            wall += time.perf_counter() - t0
            log.append((step, loss.item(), wall))
            bar.update(1)
            bar.set_postfix(loss=f"{log[-1][1]:.3f}")
            if stop.signum is not None or time.perf_counter() - last_save > save_every_s:
                save()
                last_save = time.perf_counter()
            stop.check()
            if max_minutes is not None and time.perf_counter() - start > 60 * max_minutes:
                break
        save()
    stop.check()
    return work


def training_log(name: str) -> pd.DataFrame:
    """The loss curve of a training run so far: columns step, loss, wall_s (empty if never started)."""
    path, card = cache_dir() / "train" / name / "state.pt", artifact_path("drafts", name, ".json")
    if path.exists():
        log = torch.load(path, weights_only=True)["log"]
    else:  # a shipped draft: the curve stored in its card
        log = json.loads(card.read_text()).get("loss_curve", []) if card.exists() else []
    return pd.DataFrame(log, columns=["step", "loss", "wall_s"]).assign(run=name)


def loss_curve(log: list, points: int = 300) -> list[list[float]]:
    """The training log ([step, loss, wall_s] per step) as at most `points` window means, for a card."""
    if not log:
        return []
    windows = np.array_split(np.asarray(log, dtype=float), min(points, len(log)))
    return [[int(w[-1, 0]), round(float(w[:, 1].mean()), 4), round(float(w[-1, 2]), 1)] for w in windows]


def device_name(model) -> str:
    """Where a model runs, for a card: "cpu" or "cuda (GPU name)"."""
    d = model.device
    return f"cuda ({torch.cuda.get_device_name(d)})" if d.type == "cuda" else d.type


__all__ = ["TrainConfig", "train", "check_resume", "run_record", "training_windows", "training_log"]

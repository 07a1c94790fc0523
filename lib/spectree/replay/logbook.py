"""The logbook: at every position of the target's greedy output, the full draft tree (see
`strategies.logtree`) with its node features and labels, one parquet file per prompt.

Labels: `on_path` (the node's path tokens equal the target's greedy continuation) and `target_prob`
(the target's probability of the node's token, where the target scored it: nodes whose parent is on
the greedy path — exactly the nodes a verifier ever examines). Files are written atomically and a run
resumes by skipping prompts already logged. The folder's manifest records what the logbook is made from
(`logbook_manifest`); a run asking for anything else under its name is refused before a model loads.
"""
from __future__ import annotations

import io
import json
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Optional

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from tqdm.auto import tqdm

from spectree.core.decode import greedy_continuation, truncate, walk_continuation
from spectree.core.errors import SpectreeError
from spectree.core.manifest import digest, file_digest, inside, resume_or_refuse, resume_or_restart
from spectree.core.paths import artifact_path, atomic_write_bytes, atomic_write_text, cache_dir, check_name
from spectree.core.sampling import Sampling
from spectree.core.workers import in_processes, load_models, worker_count
from spectree.core.tree import NODE_FIELDS, DraftTree, Nodes
from spectree.prompts import Prompt, chat_ids
from spectree.replay.logtree import LogTree, budget_policies, sequoia_p, sequoia_union
from spectree.strategies.c2t import load_classifier

LOG_FORMAT = 4  # 2: the beam grows from the previous beam only (replay.logtree); 3: node sources, prompt ids;
# 4: EAGLE-2's top-K beam and every root child's rank-0 continuation expanded too


@dataclass(frozen=True)
class LogConfig:
    pair: str = "smollm2-layerskip"
    max_new_tokens: int = 128
    K: int = 10  # children stored per expanded node
    d_max: int = 11
    beam: int = 10  # nodes expanded per layer by joint probability
    b_env: int = 2  # plus every node with path ranks < b_env at depth < d_env
    d_env: int = 4
    c2t: str = ""  # a C2T classifier (data/c2t/<c2t>.safetensors): its tree at c2t_beta is expanded too
    c2t_beta: float = 0.5  # (`replay.logtree`: C2T at any β ≥ c2t_beta then replays)
    shape: str = "full"  # what is expanded (`replay.logtree`): "full" (every policy replays), "path", "c2t", "dyspec"
    dyspec_budgets: tuple = ()  # "dyspec": the budgets m whose DySpec trees are logged (`logtree.budget_policies`)
    dyspec_cap: int = 8  # "dyspec": the capped DySpec's children per node
    dyspec_sequoia: tuple = ()  # "dyspec": a positional acceptance vector: Sequoia's trees of the budgets too

    def __post_init__(self):
        if not isinstance(self.pair, str):  # a `Pair` value: the config holds (and files record) its name
            object.__setattr__(self, "pair", str(self.pair))
        for key, value in asdict(self).items():
            if isinstance(value, int) and value < 1:
                raise SpectreeError(f"logbook: {key} must be positive, got {value}")
        if self.c2t:
            check_name(self.c2t, "C2T classifier")
        if not 0.0 <= self.c2t_beta <= 1.0:
            raise SpectreeError(f"logbook: c2t_beta must be in [0, 1], got {self.c2t_beta}")
        if self.shape not in LogTree.SHAPES or (self.shape == "c2t" and not self.c2t):
            raise SpectreeError(f"logbook: shape must be one of {', '.join(LogTree.SHAPES)} ('c2t' with a C2T "
                                f"classifier), got {self.shape!r}")
        budgets = self.dyspec_budgets  # a sequence, or one budget / "8,64" as a command line gives it
        budgets = str(budgets).split(",") if isinstance(budgets, (int, str)) else budgets
        object.__setattr__(self, "dyspec_budgets", tuple(sorted({int(m) for m in budgets if str(m).strip()})))
        accept = self.dyspec_sequoia  # a sequence, or "0.5/0.2" as a command line gives it
        accept = str(accept).split("/") if isinstance(accept, (int, float, str)) else accept
        object.__setattr__(self, "dyspec_sequoia", tuple(float(p) for p in accept if str(p).strip()))
        if self.shape == "dyspec" and (not self.dyspec_budgets or min(self.dyspec_budgets) < 1
                                       or max(self.dyspec_budgets) > self.K):
            raise SpectreeError(f"logbook: shape 'dyspec' needs budgets m in 1..K (K = {self.K}: uncapped DySpec "
                                f"offers m children a node), got {list(self.dyspec_budgets)}")

    def record(self) -> dict:
        """The config as files record it: without the C2T envelope's fields when there is none, without the
        shape when it is "full" and without DySpec's fields unless the shape is "dyspec" (so the logbooks made
        before them keep their names and manifests)."""
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()
               if (k != "shape" or v != "full") and (not k.startswith("dyspec_") or self.shape == "dyspec")}
        return out if self.c2t else {k: v for k, v in out.items() if k not in ("c2t", "c2t_beta")}

    def policy(self):
        model = load_classifier(artifact_path("c2t", self.c2t)) if self.c2t else None
        dyspec = self.shape == "dyspec"
        ghosts = tuple(budget_policies(self.dyspec_budgets, self.dyspec_cap, self.d_max)) if dyspec else ()
        if dyspec and self.dyspec_sequoia:
            ghosts += (sequoia_union(self.dyspec_budgets, sequoia_p(self.dyspec_sequoia)),)
        return LogTree(self.K, self.d_max, self.beam, self.b_env, self.d_env, self.c2t_beta, model, self.shape,
                       ghosts=ghosts)

    def key(self) -> str:
        """Names the logbook folder: the config plus the logbook format (bumped when what is logged changes)."""
        return digest({**self.record(), "format": LOG_FORMAT})[:10]


@dataclass
class LoggedPrompt:
    """One prompt's logged trees. `continuation` is the target's greedy output run d_max tokens past the
    end (ignoring EOS) so labels exist for every node; the generation itself is `n_valid` tokens."""

    prompt: Prompt
    prompt_len: int
    continuation: list[int]
    n_valid: int
    nodes: pd.DataFrame  # one row per node: position, node, NODE_FIELDS..., on_path, target_prob
    K: int  # children stored per expanded node
    d_max: int  # depth of the logged trees
    prompt_ids: Optional[list[int]] = None  # the prompt's token ids (chat template applied): what retrieval reads

    @cached_property
    def _groups(self) -> dict[int, pd.DataFrame]:
        return {int(k): g for k, g in self.nodes.groupby("position", sort=True)}

    def tree(self, position: int) -> DraftTree:
        rows = self._groups[position]
        nodes = Nodes.from_columns({f: rows[f].to_numpy() for f in NODE_FIELDS})
        return DraftTree(**nodes.columns(), prefix_len=self.prompt_len + position)


def label_tree(tree: DraftTree, continuation: list[int], target_probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """on_path [n] bool and target_prob [n] float (NaN where the target did not score the node).

    continuation: greedy tokens after the root; target_probs: [d_max, V] target distributions after the
    root and after each on-path prefix (row d = after d continuation tokens).
    """
    n = len(tree)
    on_path = torch.zeros(n, dtype=torch.bool)
    on_path[0] = True
    target_prob = torch.full((n,), float("nan"))
    for i in range(1, n):  # parents precede children
        p, d = int(tree.parents[i]), int(tree.depth[i])
        if on_path[p]:
            target_prob[i] = target_probs[d - 1, tree.tokens[i]]
            on_path[i] = int(tree.tokens[i]) == continuation[d - 1]
    return on_path, target_prob


@torch.inference_mode()
def log_prompt(target, draft, tokenizer, prompt: Prompt, cfg: LogConfig, eos_ids: tuple[int, ...],
               known: Optional[list[int]] = None) -> LoggedPrompt:
    """One prompt's logged trees. `known`: the target's greedy continuation of this prompt from another logbook
    of the pair (`LoggedPrompt.continuation`), reused when it runs at least d_max past max_new_tokens — the same
    greedy path, without generating it again."""
    ids = chat_ids(tokenizer, prompt.text)
    if known is not None and len(known) >= cfg.max_new_tokens + cfg.d_max:
        cont = list(known[:cfg.max_new_tokens + cfg.d_max])
        n_valid = len(truncate(cont, cfg.max_new_tokens, eos_ids))
    else:
        cont, n_valid = greedy_continuation(target, ids, cfg.max_new_tokens, cfg.d_max, eos_ids)
    policy, frames = cfg.policy(), []
    for prefix, root_logits, drafter, target_logits in walk_continuation(target, draft, ids, cont, n_valid):
        pos = prefix - len(ids)
        at = replace(policy, path=cont[pos:pos + cfg.d_max]) if cfg.shape == "path" else policy  # its greedy path
        tree = drafter.draft((ids + cont)[prefix - 1], root_logits, prefix, at, Sampling())
        probs = torch.softmax(target_logits[prefix - 1: prefix - 1 + cfg.d_max], dim=-1)
        on_path, target_prob = label_tree(tree, cont[pos:], probs)
        cols = {f: t.numpy() for f, t in tree.columns().items()}
        frames.append(pd.DataFrame({"position": pos, "node": range(len(tree)), **cols,
                                    "on_path": on_path.numpy(), "target_prob": target_prob.numpy()}))
    nodes = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return LoggedPrompt(prompt, len(ids), cont, n_valid, nodes, cfg.K, cfg.d_max, ids)


def _to_parquet_bytes(lp: LoggedPrompt) -> bytes:
    table = pa.Table.from_pandas(lp.nodes, preserve_index=False)
    meta = {"prompt": asdict(lp.prompt), "prompt_len": lp.prompt_len, "continuation": lp.continuation,
            "n_valid": lp.n_valid, "K": lp.K, "d_max": lp.d_max, "prompt_ids": lp.prompt_ids}
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"spectree": json.dumps(meta).encode()})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def read_logged_prompt(path: Path) -> LoggedPrompt:
    try:
        table = pq.read_table(path)
        meta = json.loads(table.schema.metadata[b"spectree"])
        return LoggedPrompt(Prompt(**meta["prompt"]), meta["prompt_len"], meta["continuation"], meta["n_valid"],
                            table.to_pandas(), meta["K"], meta["d_max"], meta.get("prompt_ids"))
    except Exception as err:  # pyarrow, JSON and missing-key errors all mean the same thing here
        raise SpectreeError(f"{path} is not a readable logbook file ({err!r}); delete it to re-log") from err


def logbook_dir(cfg: LogConfig, name: str) -> Path:
    """data/cache/logbooks/<pair tag>-<name>-<config key>: the pair as `Pair.tag` writes it in file names
    (a shipped pair's own name; a folder or hub pair's slug and digest)."""
    from spectree.models.pairs import as_pair

    return cache_dir() / "logbooks" / f"{as_pair(cfg.pair).tag}-{name}-{cfg.key()}"


def logbook_tag(prompts: str) -> str:
    """The logbook name of a prompt spec ("mtbench:8+humaneval:8" → "mtbench8_humaneval8"; an offset "mtbench:8@16"
    → "mtbench8at16"): `log`'s default --name, and the name under which the notebooks share one logbook
    (`notebook_logbook`). A prompt file stands
    in it by its stem and content (`prompts.prompt_set_identity`: "jsonl:q.jsonl:8" → "jsonl-q-<digest>8"), so an
    edited file gets a logbook of its own."""
    from spectree.prompts import prompt_set_identity

    return "".join(prompt_set_identity(prompts).split()).replace(":", "").replace("+", "_").replace("@", "at")


def logbook_manifest(prompts: list[Prompt], cfg: LogConfig, dtype=None, device=None) -> dict:
    """What a logbook is made from: its LogConfig, the logbook format, the prompts (keys, and a digest of their
    texts), the draft's identity (`pairs.draft_digest`; the folder name holds only the pair's), a folder or hub
    target's identity (`pairs.target_digest`), and the pair's precision and device where they are not float32 on
    the CPU (the logbooks made before they were a choice are), so retrained weights or another precision or device
    at the same names are logged again."""
    from spectree.models.pairs import as_pair, draft_digest, target_digest
    from spectree.models.targets import resolve_device

    kind = torch.device(resolve_device(device)).type  # None / 'auto': where load_pair puts the pair
    placed = {**({} if dtype in (None, torch.float32) else {"dtype": str(dtype).removeprefix("torch.")}),
              **({} if kind == "cpu" else {"device": kind})}
    pair = as_pair(cfg.pair)  # parsed once for both digests
    target = target_digest(pair)
    envelope = {}
    if cfg.c2t:  # the classifier's weights: a retrained one at the same name is logged again
        path = artifact_path("c2t", cfg.c2t)
        load_classifier(path)  # one clear error for a missing or damaged classifier, before any model loads
        envelope = {"c2t_weights": file_digest(path)}
    return {**cfg.record(), "format": LOG_FORMAT, "prompts": [p.key for p in prompts],
            "texts": digest([p.text for p in prompts]), "draft": draft_digest(pair),
            **({} if target is None else {"target": target}), **envelope, **placed}


def _legacy_manifest(out: Path, wanted: dict) -> Optional[dict]:
    """What a logbook logged before manifests was made from: its config.json and the prompts its files hold (an
    interrupted run's files are the first of the prompts it was asked); format, texts and draft were not recorded."""
    files = sorted(out.glob("*.parquet"))
    if not files or not (out / "config.json").exists():
        return None
    logged = [read_logged_prompt(f).prompt.key for f in files]
    asked = wanted["prompts"]
    return {**wanted, **json.loads((out / "config.json").read_text()),
            "prompts": asked if logged == asked[:len(logged)] else logged}


def write_logbook(prompts: list[Prompt], cfg: LogConfig, name: str, out: Optional[Path] = None,
                  models=None, rebuild: bool = False, dtype="float32", device: Optional[str] = None,
                  known: Optional[dict[str, list[int]]] = None) -> Path:
    """Log every prompt (skipping those already logged) and return the logbook folder. The pair and every prompt
    are checked against the target's context window first (`pairs.check_pair_prompts`), before anything is
    written. A logbook of this name made from anything else (`logbook_manifest`) is a named result: refused in
    one line before any model loads (`log --name`); with `rebuild` it is an internal cache (`notebook_logbook`):
    its files are removed and it is logged again. `dtype`, `device`: how `load_pair` loads the pair (with
    `models`, theirs, and their kernels in worker processes). `known`: {prompt key: the target's greedy
    continuation} from another logbook of the pair (`log_prompt`)."""
    from spectree.core.kernels import kernels_in_use
    from spectree.models.loading import load_pair
    from spectree.models.pairs import check_pair_prompts
    from spectree.models.targets import resolve_device, resolve_dtype

    check_pair_prompts(cfg.pair, prompts, cfg.max_new_tokens, cfg.d_max, models)
    out = Path(out) if out else logbook_dir(cfg, check_name(name, "logbook"))
    dtype = models[0].dtype if models else resolve_dtype(dtype, device)
    placed = models[0].device if models else resolve_device(device)
    wanted = logbook_manifest(prompts, cfg, dtype, placed)
    legacy = None if inside(out).exists() else _legacy_manifest(out, wanted)
    if rebuild:
        resume_or_restart(inside(out), wanted, lambda: _clear(out), legacy)
    else:
        resume_or_refuse(out, wanted, any(out.glob("*.parquet")), "pass another --name, or delete it to log again",
                         legacy)
    atomic_write_text(out / "config.json", json.dumps(cfg.record(), indent=1))  # the LogConfig, for readers
    todo = [(i, p, (known or {}).get(p.key)) for i, p in enumerate(prompts) if not (out / f"{i:04d}.parquet").exists()]
    workers = min(len(todo), worker_count(placed))
    if workers > 1:  # prompts are independent: one process each, sharing the cores (`core.workers`)
        from functools import partial

        kernels = kernels_in_use(models[0]) if models else "stock"  # the caller's kernels: the same products
        in_processes(_log_in_worker, [(i, p, cfg, out, cont) for i, p, cont in todo], workers,
                     partial(load_pair, cfg.pair, device=str(placed), dtype=dtype, kernels=kernels), f"logging {name}")
    elif todo:
        target, draft, tok = models or load_pair(cfg.pair, device=device, dtype=dtype)
        for i, prompt, cont in tqdm(todo, desc=f"logging {name}", unit="prompt"):
            _log_one(target, draft, tok, i, prompt, cfg, out, cont)
    return out


def _log_one(target, draft, tok, i: int, prompt: Prompt, cfg: LogConfig, out: Path,
             known: Optional[list[int]] = None) -> None:
    lp = log_prompt(target, draft, tok, prompt, cfg, (tok.eos_token_id,), known)
    atomic_write_bytes(out / f"{i:04d}.parquet", _to_parquet_bytes(lp))  # atomic: an interrupted run resumes


def _log_in_worker(i: int, prompt: Prompt, cfg: LogConfig, out: Path, known: Optional[list[int]] = None) -> None:
    _log_one(*load_models(), i, prompt, cfg, out, known)


def _clear(out: Path) -> None:
    """A logbook's logged files (its manifest is the caller's)."""
    for f in [*out.glob("*.parquet"), out / "config.json"]:
        f.unlink(missing_ok=True)


def notebook_logbook(prompts: str, cfg: LogConfig, models=None) -> Path:
    """The logbook the notebooks share for a prompt spec (named by `logbook_tag`): logged if missing, resumed if
    cut short, and logged again when made from anything else — a retrained draft, other prompt texts (an internal
    cache; `log --name` refuses instead)."""
    from spectree.prompts import parse_prompt_spec

    return write_logbook(parse_prompt_spec(prompts), cfg, logbook_tag(prompts), models=models, rebuild=True)


def c2t_logbook(logbook: list[LoggedPrompt], cfg: LogConfig, classifier: str, beta: float,
                models=None) -> list[LoggedPrompt]:
    """C2T's own logbook of `logbook`'s prompts (the same greedy path): only C2T's tree at `beta` expanded (shape
    "c2t", `replay.logtree`) at `cfg`'s K and depth, so that C2T at every β ≥ beta and any topk replays on it at a
    fraction of logging `cfg` again. It serves C2T's settings only
    (`analysis.sweeps.sweep`'s `own`): notebook 02's scored prompts once their classifier is trained. Cached under
    the classifier's name, logged again when the classifier or anything else it is made from changes; the greedy
    continuations are `logbook`'s (`log_prompt`'s `known`)."""
    env = replace(cfg, beam=1, b_env=1, d_env=1, c2t=classifier, c2t_beta=beta, shape="c2t")
    return read_logbook(write_logbook([lp.prompt for lp in logbook], env, f"{classifier}-c2t", models=models,
                                      rebuild=True, known=_continuations(logbook)))  # the name checked by LogConfig


def dyspec_logbook(logbook: list[LoggedPrompt], cfg: LogConfig, name: str, budgets, cap: int = 8,
                   d_max: Optional[int] = None, acceptance=(), models=None) -> list[LoggedPrompt]:
    """DySpec's own logbook of `logbook`'s prompts (the same greedy path): only DySpec's trees expanded (shape
    "dyspec", `replay.logtree`) at each budget m of `budgets`, uncapped (K = m children a node) and capped at `cap`,
    to depth `d_max` (cfg's by default), so that DySpec at m = 64 — wider than any beam of the full logbook —
    replays at a fraction of its nodes; with a positional `acceptance` vector, Sequoia's trees of those budgets too.
    It serves those settings only (`analysis.sweeps.sweep`'s `own`).
    Cached under `name`-dyspec; logged again when anything it is made from changes; the greedy continuations are
    `logbook`'s."""
    budgets = tuple(sorted({int(m) for m in budgets}))
    env = replace(cfg, K=max(budgets), d_max=d_max or cfg.d_max, beam=1, b_env=1, d_env=1, shape="dyspec",
                  dyspec_budgets=budgets, dyspec_cap=cap, dyspec_sequoia=tuple(acceptance))
    return read_logbook(write_logbook([lp.prompt for lp in logbook], env, f"{name}-dyspec", models=models,
                                      rebuild=True, known=_continuations(logbook)))


def _continuations(logbook: list[LoggedPrompt]) -> dict[str, list[int]]:
    """{prompt key: the target's greedy continuation} of a logbook: a narrower logbook of its prompts walks the same
    greedy path without generating it again."""
    return {lp.prompt.key: lp.continuation for lp in logbook}


def read_logbook(path: Path) -> list[LoggedPrompt]:
    files = sorted(Path(path).glob("*.parquet"))
    if not files:
        raise SpectreeError(f"no logbook at {path}: run `python -m spectree log` first")
    return [read_logged_prompt(f) for f in files]

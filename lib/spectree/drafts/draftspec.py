"""Draft specs (`layerskip:N`, `edd:NAME[@V]`, `vdm:NAME[@V]`, `hf:MODEL`, `eagle:FOLDER`, `mix:λ:DRAFT`): the one
parser, the checks of a trained draft's files (checkpoint, token ranking) and the layer-skip draft built from the
target's own layers. Loading a draft against its target is `models.loading.load_draft`."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel

from spectree.core.errors import SpectreeError
from spectree.core.paths import artifact_path, check_safetensors, repair_hint


def check_layerskip(n_layers: int, config: PretrainedConfig) -> None:
    """A layer-skip draft keeps 1 <= N < the target's layers (checked from the config alone, before a load)."""
    total = config.num_hidden_layers
    if not 1 <= n_layers < total:
        raise SpectreeError(f"layer-skip draft needs 1 <= N < {total} (the target's layers), got layerskip:{n_layers}")


def layerskip_draft(target: PreTrainedModel, n_layers: int) -> PreTrainedModel:
    """Training-free draft: the first `n_layers` target layers + final norm + LM head (weights shared); a target
    whose layers are of several kinds (full and sliding-window: Gemma-2/3) keeps the kinds of those layers."""
    check_layerskip(n_layers, target.config)
    cfg = target.config.__class__.from_dict(target.config.to_dict())
    cfg.num_hidden_layers = n_layers
    if getattr(cfg, "layer_types", None) is not None:
        cfg.layer_types = list(cfg.layer_types[:n_layers])
    with torch.device("meta"):
        draft = type(target)(cfg)
    draft.model.embed_tokens = target.model.embed_tokens
    draft.model.layers = nn.ModuleList(target.model.layers[:n_layers])
    draft.model.norm = target.model.norm
    draft.model.rotary_emb = target.model.rotary_emb
    draft.lm_head = target.lm_head
    return draft.eval()


def check_draft_file(path: Path) -> dict:
    """The metadata of a draft checkpoint, once the file is known to be whole and to say what it holds (kind edd
    or vdm; EDD's hidden_layer): one line with the fix otherwise (`git checkout` for a shipped one)."""
    from safetensors import safe_open

    rebuild = f"re-export it with `python -m spectree train --name {path.stem} --export` (docs/training.md)"
    if not path.exists():
        raise SpectreeError(f"draft checkpoint {path} is missing: train it with `python -m spectree train "
                            f"--name {path.stem} --export` (docs/training.md)")
    check_safetensors(path, rebuild)
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    kind, layer = meta.get("kind"), meta.get("hidden_layer", "")
    if kind not in ("edd", "vdm") or (kind == "edd" and not layer.lstrip("-").isdigit()):
        raise SpectreeError(f"{path} lacks the metadata that says what it holds (kind={kind!r}, hidden_layer="
                            f"{meta.get('hidden_layer')!r}; expected kind 'edd' or 'vdm', and EDD's hidden_layer): "
                            f"{repair_hint(path, rebuild)}")
    return meta


@dataclass(frozen=True)
class DraftSpec:
    """A parsed draft spec: 'layerskip:N', 'edd:NAME' / 'vdm:NAME' with an optional '@V' (the draft head
    keeps the V most frequent tokens of its training data), 'hf:MODEL' or 'eagle:FOLDER' (MODEL, FOLDER: a
    local folder or a hub id in the HF cache), or 'mix:λ:DRAFT' (`drafts.mix`: DRAFT mixed with the target)."""

    kind: str
    arg: str  # N for layerskip, the model for hf / eagle, the inner draft spec for mix, else the checkpoint name
    vocab: Optional[int] = None
    weight: Optional[float] = None  # mix: λ, the target's share of the draft distribution (`drafts.mix`)

    @property
    def head(self) -> str:
        """The draft head in words, for table labels: 'full head' or 'V-token head'."""
        return "full head" if self.vocab is None else f"{self.vocab}-token head"

    @property
    def checkpoint(self) -> Optional[Path]:
        return artifact_path("drafts", self.arg) if self.kind in ("edd", "vdm") else None


def parse_draft(spec: str) -> DraftSpec:
    """The one parser of draft specs; an unknown, empty or malformed spec is refused."""
    kind, _, arg = spec.partition(":")
    if kind in ("hf", "eagle") and arg:
        return DraftSpec(kind, arg)
    if kind == "mix":
        from spectree.drafts.mix import check_weight

        weight, _, inner = arg.partition(":")
        try:
            value = float(weight)
        except ValueError:
            raise SpectreeError(f"draft '{spec}': expected mix:λ:DRAFT with λ a number in [0, 1] and DRAFT a "
                                f"draft spec, e.g. mix:0.6:edd:smollm2-edd") from None
        if parse_draft(inner).kind == "mix":
            raise SpectreeError(f"draft '{spec}': a mix draft mixes a real draft, not another mix")
        return DraftSpec(kind, inner, weight=check_weight(value))
    name, at, vocab = arg.partition("@")
    if kind not in ("layerskip", "edd", "vdm") or not name or (at and (kind == "layerskip" or not vocab.isdigit()
                                                                       or int(vocab) < 1)) \
            or (kind == "layerskip" and not (name.isdigit() and int(name) >= 1)):
        raise SpectreeError(f"unknown draft '{spec}': expected 'layerskip:N' (N >= 1 target layers), 'edd:NAME[@V]' "
                            f"or 'vdm:NAME[@V]' (V >= 1: the draft head keeps the V most frequent tokens of its "
                            f"training data), 'hf:MODEL' (a standalone causal LM: a folder or a hub id) or "
                            f"'eagle:FOLDER' (an EAGLE head) or 'mix:λ:DRAFT' (a synthetic draft of quality λ)")
    return DraftSpec(kind, name, int(vocab) if at else None)


def draft_vocab(spec: str) -> Optional[torch.Tensor]:
    """The token ids a reduced draft head keeps ('NAME@V': the first V of data/drafts/NAME.vocab.npy, the
    draft's training tokens by frequency), or None for a full head."""
    draft = parse_draft(spec)
    if draft.vocab is None:
        return None
    ranking_path = draft.checkpoint.with_name(f"{draft.arg}.vocab.npy")
    if not ranking_path.exists():
        raise SpectreeError(f"draft '{spec}': no token ranking {ranking_path.name} (exported with the checkpoint "
                            f"by `python -m spectree train ... --export`)")
    rebuild = f"re-export it with `python -m spectree train --name {draft.arg} --export`"
    try:
        ranking = np.load(ranking_path, allow_pickle=False)
    except (ValueError, EOFError, OSError) as err:  # an empty or cut file: EOFError; a bad header: ValueError
        raise SpectreeError(f"{ranking_path} is not a readable token ranking ({type(err).__name__}: "
                            f"{str(err).splitlines()[0] if str(err) else 'empty file'}); "
                            f"{repair_hint(ranking_path, rebuild)}") from err
    if ranking.ndim != 1 or not np.issubdtype(ranking.dtype, np.integer) or draft.vocab > len(ranking):
        raise SpectreeError(f"{ranking_path} ranks {ranking.shape} tokens ({ranking.dtype}); '{spec}' asks for "
                            f"{draft.vocab}: {repair_hint(ranking_path, rebuild)}")
    return torch.from_numpy(ranking[:draft.vocab].astype(np.int64))

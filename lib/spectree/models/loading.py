"""Loading a pair's models: the draft of a spec for a loaded target (`load_draft`: a layer-skip draft, a shipped
one-layer EDD / VDM checkpoint, an `hf:` model, an EAGLE head, a mix), the pair itself (`load_pair`) and a
reference draft of the same target (`reference_draft`). The loaders look each other and `pairs.load_target` up
when called, so that one patch (`monkeypatch.setattr`) of a loader reaches every path through it."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from transformers import PreTrainedModel

from spectree.core.errors import SpectreeError
from spectree.drafts.draftspec import check_draft_file, draft_vocab, layerskip_draft, parse_draft
from spectree.models import pairs
from spectree.models.pairs import Pair
from spectree.models.targets import eagle_folder, fit_vocab, resolve_dtype


def load_trained_draft(path: Path, target: PreTrainedModel):
    """A shipped one-layer draft (stored in fp16 or int8, `drafts.storage`): VDM as a plain HF model, EDD wrapped in
    its hidden-state drafter."""
    from safetensors import safe_open

    from spectree.drafts.edd import EDDDrafter, add_fusion, one_layer_draft
    from spectree.drafts.storage import unpack

    meta = check_draft_file(path)
    with safe_open(str(path), framework="pt") as f:
        state = {k.removeprefix("layer."): v for k, v in unpack(f).items()}  # fp16 or int8 rows (`storage`)
    draft = one_layer_draft(target)
    fuse = state.pop("fuse.weight", None)
    if fuse is not None:
        if tuple(fuse.shape) != (target.config.hidden_size,) * 2:
            raise SpectreeError(f"{path} does not fit this target: fuse.weight has shape {tuple(fuse.shape)}, "
                                f"expected {(target.config.hidden_size,) * 2}")
        add_fusion(draft).fuse.weight.data.copy_(fuse.to(target.device, target.dtype))
    layer = draft.model.layers[0]
    expected = {k: tuple(v.shape) for k, v in layer.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items()}
    if expected != got:
        missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
        wrong = sorted(k for k in set(expected) & set(got) if expected[k] != got[k])
        raise SpectreeError(f"{path} does not fit this target: missing {missing}, unexpected {extra}, "
                            f"wrong shapes {[(k, got[k], expected[k]) for k in wrong]}")
    layer.load_state_dict({k: v.to(target.device, target.dtype) for k, v in state.items()})
    if meta.get("kind") == "edd":
        return EDDDrafter(draft, int(meta["hidden_layer"]), meta.get("hidden_norm", "0") == "1")
    return draft


def load_draft(spec: str, target: PreTrainedModel, device: Optional[str] = None, dtype=None):
    """The draft of `spec` for `target`, on the target's device and in its dtype (`dtype`: override for an
    `hf:` draft). A standalone `hf:` draft whose head covers another number of ids than the target's scores
    exactly the target's (`targets.fit_vocab`)."""
    from spectree.drafts.edd import EDDDrafter, reduce_vocab

    parsed, ids = parse_draft(spec), draft_vocab(spec)
    if parsed.kind == "mix":
        from spectree.core.decode import as_drafter
        from spectree.drafts.mix import MixDrafter

        return MixDrafter(as_drafter(load_draft(parsed.arg, target, device, dtype)), target, parsed.weight)
    if parsed.kind == "layerskip":
        draft = layerskip_draft(target, int(parsed.arg))
    elif parsed.kind == "hf":
        where = str(target.device) if device in (None, "auto") else device  # a small draft stays on one device
        draft = fit_vocab(pairs.load_target(parsed.arg, where, dtype or target.dtype)[0], target.config.vocab_size)
    elif parsed.kind == "eagle":
        from spectree.drafts.eagle import load_eagle_drafter

        draft = load_eagle_drafter(eagle_folder(parsed.arg), target)
    else:
        draft = load_trained_draft(parsed.checkpoint, target)
    if ids is not None:
        reduce_vocab(draft.lm.model if isinstance(draft, EDDDrafter) else draft, ids)
    return draft


def load_pair(name: "str | Pair" = "smollm2-layerskip", device: Optional[str] = None, kernels: str = "stock",
              dtype="auto"):
    """(target, draft, tokenizer) for a pair (named or by spec); `kernels`: "stock" (HF's), "packed" (both
    multiply by prepacked weights where the CPU allows it) or "auto" (prepacked from the row count where they are
    faster on this machine; `kernels.use_kernels`). `device`: None / 'auto' (CUDA when present, a large target
    over every GPU) or a torch device; `dtype`: 'auto' (the default: bf16 on CUDA, fp32 on CPU, so notebooks
    follow the device), 'float32', 'bfloat16', 'float16'. Everything is checked (`check_pair_name`, the dtype) before any weights load."""
    from spectree.core.drafting import draft_model
    from spectree.core.kernels import check_kernels, use_kernels

    check_kernels(kernels)
    dtype = resolve_dtype(dtype, device)
    spec = pairs.check_pair_name(name)  # parsed (`pairs.as_pair`) and checked once
    target, tok = pairs.load_target(spec.target, device=device, dtype=dtype)
    draft = load_draft(spec.draft, target, device, dtype)
    use_kernels(kernels, target, draft_model(draft))
    return target, draft, tok


def reference_draft(pair: "str | Pair", reference: "str | Pair", models, kernels: str = "stock"):
    """(the draft of pair `reference`, its head in words) loaded onto the target of `models` (loaded for `pair`),
    on `kernels`: e.g. the full-head draft timed beside the reduced head a notebook times by default
    (`run_strategies(..., drafts=)`). Both pairs must name the same target; refused in one line otherwise."""
    from spectree.core.drafting import draft_model
    from spectree.core.kernels import use_kernels

    mine, theirs = pairs.check_pair_name(pair), pairs.check_pair_name(reference)
    if mine.target != theirs.target:
        raise SpectreeError(f"reference pair '{reference}' has target {theirs.target}, not {pair}'s {mine.target}: "
                            f"a reference row must draft for the same target")
    draft = load_draft(theirs.draft, models[0])
    use_kernels(kernels, draft_model(draft))
    return draft, theirs.spec.head

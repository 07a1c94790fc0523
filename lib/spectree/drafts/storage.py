"""How a trained draft layer is stored in data/drafts/NAME.safetensors: `fp16` (the deployed drafts) or `int8`, a
weight matrix W [out, in] as int8 codes with one fp32 scale per output row (W ≈ codes · scale[:, None]; 1-D
tensors, the norms, stay fp16). int8 halves a checkpoint, which keeps the tracked tree small enough to travel to a
GPU machine; the ablation and reference drafts are stored so, and their agreement numbers move within their noise
(docs/training.md, "Storage"). `pack` writes either precision, `unpack` reads either; the file's metadata says
which (`precision`; absent: fp16, the files written before int8 existed). Its card, NAME.json, is written by
`card_json`.

    python -m spectree.drafts.storage int8 data/drafts/abl-edd-self.safetensors ...   # re-store files in place
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from spectree.core.errors import SpectreeError
from spectree.core.paths import atomic_write_text

PRECISIONS = ("fp16", "int8")
SCALE = ".scale"  # int8: NAME holds the codes [out, in], NAME.scale the rows' scales [out]


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-row int8: codes [out, in] in −127…127 and scales [out] (fp32) with w ≈ codes · scale; the
    rounding error of an entry is at most half its row's scale (absmax / 254)."""
    w = w.float()
    scale = w.abs().amax(dim=1).clamp(min=torch.finfo(torch.float32).tiny) / 127.0  # [out]
    codes = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return codes.contiguous(), scale.contiguous()


def pack(tensors: dict[str, torch.Tensor], precision: str = "fp16") -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors to save and the metadata entry that says how (`precision`)."""
    if precision not in PRECISIONS:
        raise SpectreeError(f"unknown draft precision '{precision}': use one of {PRECISIONS}")
    out = {}
    for name, t in tensors.items():
        if precision == "int8" and t.dim() == 2:
            out[name], out[name + SCALE] = quantize_rows(t)
        else:
            out[name] = t.half().contiguous()
    return out, {"precision": precision}


def unpack(f) -> dict[str, torch.Tensor]:
    """{name: fp32 tensor} from an open `safe_open` file of either precision."""
    stored = {k: f.get_tensor(k) for k in f.keys()}
    out = {}
    for name, t in stored.items():
        if name.endswith(SCALE) and name.removesuffix(SCALE) in stored:
            continue
        scale = stored.get(name + SCALE)
        out[name] = t.float() * scale.float()[:, None] if t.dtype == torch.int8 and scale is not None else t.float()
    return out


def restore(path: Path, precision: str) -> Path:
    """Re-store a draft checkpoint in `precision`, in place and atomically, keeping its metadata (its card, NAME.json,
    records the precision)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from spectree.drafts.draftspec import check_draft_file

    meta = check_draft_file(path)
    with safe_open(str(path), framework="pt") as f:
        tensors = unpack(f)
    packed, how = pack(tensors, precision)
    tmp = path.with_name(f".{path.name}.tmp")
    save_file(packed, str(tmp), metadata={**meta, **how})
    tmp.replace(path)
    card = path.with_suffix(".json")
    if card.exists():  # the card says how its checkpoint is stored
        atomic_write_text(card, card_json({**json.loads(card.read_text()), "precision": precision}))
    return path


def card_json(card: dict) -> str:
    """A draft's card (NAME.json) as JSON, indented like the others, with each id list of its `training_prompts` on
    one line (`training.provenance`; a card stays a few hundred kB)."""
    ids = card.get("training_prompts") or {}
    lines = {d: json.dumps(v) for d, v in ids.items() if isinstance(v, list)}
    text = json.dumps({**card, "training_prompts": {**ids, **{d: f"@@{d}@@" for d in lines}}} if ids else card,
                      indent=1)
    for d, line in lines.items():
        text = text.replace(json.dumps(f"@@{d}@@"), line)
    return text


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in PRECISIONS:
        print(f"usage: python -m spectree.drafts.storage {{{','.join(PRECISIONS)}}} FILE.safetensors ...",
              file=sys.stderr)
        return 2
    for name in argv[1:]:
        before = Path(name).stat().st_size
        print(f"{restore(Path(name), argv[0])}: {before:,} → {Path(name).stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Shipping a trained draft: its layer as data/drafts/NAME.safetensors (fp16 or int8 rows, `drafts.storage`) and its
card NAME.json: the recipe (`training.TrainConfig`), steps, loss curve, metrics and the prompts its text came from
(`provenance`). `python -m spectree train --export` calls it when training ends."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Optional

import torch
from safetensors.torch import save_file

from spectree.core.paths import artifact_path, atomic_write_bytes, atomic_write_text
from spectree.drafts.storage import card_json, pack
from spectree.training.provenance import exported_prompts
from spectree.training.training import TrainConfig, data_description, loss_curve


def export_checkpoint(name: str, work: Path, cfg: TrainConfig, target_name: str, metrics: dict,
                      out_dir: Optional[Path] = None, device: str = "cpu", precision: str = "fp16") -> Path:
    """Ship the draft layer as safetensors in data/drafts/ (`precision` fp16 or int8 rows, `drafts.storage`) with a
    JSON card (`device`: where it trained; `training_prompts`: the ids of the prompts its text came from,
    `training.provenance`)."""
    state = torch.load(work / "state.pt", weights_only=True)
    out_dir = out_dir or artifact_path("drafts", name).parent
    out_dir.mkdir(parents=True, exist_ok=True)
    tensors = {f"layer.{k}": v for k, v in state["layer"].items()}
    if "fuse" in state:
        tensors["fuse.weight"] = state["fuse"]["weight"]
    tensors, stored = pack(tensors, precision)
    tmp = out_dir / f".{name}.safetensors.tmp"
    layer = cfg.hidden_layer if cfg.hidden_layer >= 0 else state["hidden_layer"]
    save_file(tensors, str(tmp), metadata={"kind": cfg.kind, "hidden_layer": str(layer),
                                           "hidden_norm": str(int(cfg.hidden_norm)), **stored})
    tmp.replace(out_dir / f"{name}.safetensors")
    if (work / "vocab.npy").exists():  # its training tokens by frequency: the reduced draft vocabulary
        atomic_write_bytes(out_dir / f"{name}.vocab.npy", (work / "vocab.npy").read_bytes())
    card = {"name": name, "target": target_name, "config": asdict(cfg), "steps": state["step"],
            "tokens": state["step"] * cfg.batch * cfg.seq_len, "wall_s": round(state["wall"], 1),
            "final_loss": state["log"][-1][1] if state["log"] else None,
            "data": data_description(cfg, state.get("raw", False)),
            "init": state.get("init"), "device": device, "precision": precision, "metrics": metrics,
            "training_prompts": exported_prompts(cfg, state["step"] * cfg.batch, target_name, state.get("init"),
                                                 out_dir),
            "loss_curve": loss_curve(state["log"])}
    atomic_write_text(out_dir / f"{name}.json", card_json(card))
    return out_dir / f"{name}.safetensors"

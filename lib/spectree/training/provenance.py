"""Which prompts a trained draft drew its text from, recorded in its card as `training_prompts`, so that no
notebook scores a draft on them (tests/test_train_test_split.py):

    "training_prompts": {"sharegpt": [record ids], "pystdlib": [function ids], "how": "..."}

ShareGPT ids are the records of the conversations a run's text windows came from (`--data sharegpt`: every
conversation with a window among those trained on), or of the first turns the target answered (`--data self`:
every answered prompt, whether or not the run's steps reached its answer); `pystdlib` ids are the standard-library
functions posed to complete. A run started from another checkpoint (`--init-from`) adds that checkpoint's card's
prompts; a card whose chain of runs is not all known says so in `how` and holds `"complete": false`.

`train --export` records them. For a card made before that, they are recomputed from its recipe — the data order
is a pure function of the seed, the counts and the tokenizer, so no training is repeated — including the earlier
runs it started from, listed in the card's `stages` ([{name, steps, config}], config: the fields that differ from
`TrainConfig`'s defaults):

    python -m spectree.training.provenance NAME ...   # rewrite data/drafts/NAME.json's training_prompts
"""
from __future__ import annotations

import json
import sys
from dataclasses import fields
from pathlib import Path
from typing import Optional

from spectree.core.errors import SpectreeError
from spectree.core.paths import artifact_path, atomic_write_text
from spectree.drafts.storage import card_json
from spectree.training.selfdistill import answer_prompt_keys, sharegpt_window_sources

DATASETS = ("sharegpt", "pystdlib")  # the prompt sets draft training reads (never MT-bench or HumanEval)


def run_prompt_ids(cfg, windows: int, tokenizer) -> dict[str, list[str]]:
    """{dataset: sorted ids} of one run of TrainConfig `cfg` that trained on `windows` windows."""
    if cfg.data == "sharegpt":
        return {"sharegpt": sorted(set(sharegpt_window_sources(tokenizer, cfg.seq_len, cfg.seed, windows)))}
    out = {"sharegpt": answer_prompt_keys(tokenizer, cfg.seed, cfg.self_prompts, "sharegpt", cfg.self_max_new,
                                          cfg.self_batch)}
    if cfg.self_code_prompts:
        out["pystdlib"] = answer_prompt_keys(tokenizer, cfg.seed, cfg.self_code_prompts, "pystdlib", cfg.self_max_new,
                                             cfg.self_batch)
    return {k: sorted(set(v)) for k, v in out.items()}


def merged(*parts: dict) -> dict[str, list[str]]:
    """The union of several {dataset: ids}, sorted per dataset."""
    return {d: sorted({i for p in parts for i in p.get(d, [])}) for d in DATASETS if any(p.get(d) for p in parts)}


def card_prompts(card: dict) -> Optional[dict[str, list[str]]]:
    """{dataset: ids} a card records (None when it records none)."""
    found = card.get("training_prompts")
    return None if not isinstance(found, dict) else {d: list(found.get(d, [])) for d in DATASETS}


def exported_prompts(cfg, windows: int, target_name: str, init: Optional[dict], out_dir: Path) -> dict:
    """The `training_prompts` field of a card `train --export` writes: this run's prompts and, when it started from
    a checkpoint, that checkpoint's card's (found beside it in `out_dir`)."""
    from spectree.models.pairs import target_tokenizer

    try:
        own = run_prompt_ids(cfg, windows, target_tokenizer(target_name)[0])
    except SpectreeError as err:  # the prompt sources are not on this machine, say: the card says so
        return {"how": f"not recorded: {err}", "complete": False}
    how, earlier = "recorded at export", {}
    if init:
        card = Path(out_dir) / (Path(init["from"]).stem + ".json")
        earlier = card_prompts(json.loads(card.read_text())) if card.exists() else None
        if earlier is None:
            return {**merged(own), "how": f"{how}; the initial weights' ({init['from']}) prompts are unknown",
                    "complete": False}
        how += f", with those of its initial weights ({init['from']})"
    return {**merged(own, earlier), "how": how}


def recomputed_prompts(card: dict, tokenizer) -> dict:
    """`training_prompts` recomputed from a card's recipe: its config and the steps it ran, after its `stages`."""
    from spectree.training.training import TrainConfig

    known = {f.name for f in fields(TrainConfig)}
    runs = [*card.get("stages", []), {"name": card["name"], "steps": card["steps"], "config": card["config"]}]
    parts = []
    for run in runs:
        cfg = TrainConfig(**{k: v for k, v in run["config"].items() if k in known})
        parts.append(run_prompt_ids(cfg, run["steps"] * cfg.batch, tokenizer))
    chain = " → ".join(r["name"] for r in runs)
    complete = not card.get("init") or bool(card.get("stages"))
    return {**merged(*parts), "how": f"recomputed from the card's recipe ({chain}) by `python -m "
                                     f"spectree.training.provenance {card['name']}`",
            **({} if complete else {"complete": False})}


def write_card_prompts(name: str) -> Path:
    """Recompute data/drafts/NAME.json's training_prompts from its recipe and store them in it."""
    from spectree.models.pairs import target_tokenizer

    path = artifact_path("drafts", name, ".json")
    if not path.exists():
        raise SpectreeError(f"no draft card {path}")
    card = json.loads(path.read_text())
    card["training_prompts"] = recomputed_prompts(card, target_tokenizer(card["target"])[0])
    atomic_write_text(path, card_json(card))
    return path


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: python -m spectree.training.provenance NAME ...", file=sys.stderr)
        return 2
    for name in argv:
        path = write_card_prompts(name)
        ids = json.loads(path.read_text())["training_prompts"]
        print(f"{path}: " + ", ".join(f"{len(ids.get(d, []))} {d}" for d in DATASETS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Train apart from test (issue 66): no prompt a component was trained or fitted on is scored with it by a notebook of
the default or quick profile — a draft (its card's `training_prompts`, `training.provenance`), a C2T classifier (its
card's `prompts`, or the part of its prompts a notebook trains its own on; for a notebook that names none, the one
`token_tables.c2t_classifier_confidence` finds for its pair), the step model (`stepmodel.FIT_PROMPTS`)
— and the classifier a notebook uses was trained on the trees of the notebook's own head (its card's pair).

A notebook's scored prompts are its prompt parameters (`prompts`, `copy_prompts`, `other_prompts`,
`lossless_prompts`, `dataset` with `n_prompts` or `prompt_index`), read from its parameters cell under the profile's
values. ShareGPT first turns are compared by text as well as by record id (V3 repeats the first turn of a split
conversation under another id), and a `copy` prompt by the record it was drawn from.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import pandas as pd
import pytest

from spectree.analysis.surfaces import made_for_another_pair
from spectree.analysis.sweeps import split_logbook
from spectree.analysis.token_tables import c2t_classifier_confidence, prompt_spec
from spectree.models.pairs import as_pair
from spectree.training.provenance import DATASETS as TRAINING_SOURCES
from spectree.prompts import Prompt, load_prompts, load_sharegpt_conversations, parse_prompt_spec
from spectree.runs.profiles import profile_params
from spectree.runs.runner import notebook_parameters
from spectree.speed.stepmodel import FIT_PROMPTS
from spectree.strategies.c2t import C2TClassifier, FEATURES, save_classifier

ROOT = Path(__file__).resolve().parents[1]
C2T_DIR = ROOT / "data" / "c2t"
PROFILES = ("default", "quick", "paper")
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SPEC_PARAMS = ("prompts", "copy_prompts", "other_prompts", "lossless_prompts")
PAIR_PARAMS = ("pair", "reference_pair", "pairs", "ablation_base", "ablations", "hidden_layers", "equal_budget")
NOT_SCORED = {"08_classifier_surfaces": ("prompts",)}  # 08 draws its classifier on random inputs: these train a fallback
SHIPPED_DRAFTS = {"smollm2-edd": (13849, 890), "smollm2-vdm": (768, 512), "abl-edd-self": (768, 512),
                  "abl-edd-fuse-self": (768, 512)}  # name: (at least this many ShareGPT ids, pystdlib ids)


@dataclass(frozen=True)
class Component:
    """Something trained or fitted on prompts: `keys` are their source keys; `scores` the notebook's prompts it is
    used on (all of them unless the notebook scores it on a held-out part)."""

    name: str
    keys: frozenset
    scores: tuple


def source_key(p: Prompt) -> str:
    """The key of the prompt a scored prompt is drawn from: a `copy` prompt's own id names its source record."""
    return p.id if p.dataset == "copy" else p.key


@lru_cache(maxsize=1)
def sharegpt_texts() -> tuple[dict, dict]:
    """({record id: first turn}, {first turn: record ids})."""
    by_id = {p.id: p.text for p in load_prompts("sharegpt")}
    by_text: dict[str, set] = {}
    for i, text in by_id.items():
        by_text.setdefault(text, set()).add(i)
    return by_id, by_text


def with_same_text(keys: set[str]) -> frozenset:
    """`keys`, plus every ShareGPT record whose first turn is that of a ShareGPT record among them."""
    by_id, by_text = sharegpt_texts()
    more = {f"sharegpt/{j}" for k in keys if k.startswith("sharegpt/") and k[9:] in by_id
            for j in by_text[by_id[k[9:]]]}
    return frozenset(keys | more)


def params(notebook: str, profile: str) -> dict:
    return {**notebook_parameters(ROOT / "notebooks" / f"{notebook}.ipynb"), **profile_params(profile).get(notebook, {})}


def scored_prompts(notebook: str, p: dict) -> list[Prompt]:
    skip = NOT_SCORED.get(notebook, ())
    specs = [p[k] for k in SPEC_PARAMS if p.get(k) and k not in skip]
    if p.get("dataset") and "n_prompts" in p:
        specs.append(prompt_spec(p["dataset"], p["n_prompts"]))
    out = [q for spec in specs for q in parse_prompt_spec(spec)]
    if p.get("dataset") and "prompt_index" in p:
        out += load_prompts(p["dataset"], 1, p["prompt_index"])
    return out


def notebook_pairs(p: dict) -> list[str]:
    out = []
    for key in PAIR_PARAMS:
        value = p.get(key)
        out += list(value.values()) if isinstance(value, dict) else list(value) if isinstance(value, list) else [value]
    return [v for v in out if v]


@lru_cache(maxsize=None)
def draft_card(draft: str) -> Optional[Path]:
    """The card of a pair's trained draft (a `mix:λ:DRAFT`'s inner one), None for a draft trained on nothing of ours
    (layer-skip, hf:, eagle:) or a checkpoint not shipped (the notebooks skip it)."""
    spec = as_pair(f"t+{draft}").spec
    if spec.kind == "mix":
        return draft_card(spec.arg)
    path = spec.checkpoint.with_suffix(".json") if spec.checkpoint is not None else None
    return path if path is not None and path.exists() else None


@lru_cache(maxsize=None)
def card_keys(card: Path) -> Optional[frozenset]:
    """A draft card's training prompts as source keys (None when it does not record them all)."""
    ids = json.loads(card.read_text()).get("training_prompts")
    if not isinstance(ids, dict) or ids.get("complete", True) is False:
        return None
    return with_same_text({f"{d}/{i}" for d in TRAINING_SOURCES for i in ids.get(d, [])})


def classifier(notebook: str, p: dict, scored: list[Prompt]) -> tuple[list[Component], list[str]]:
    """The notebook's C2T classifier(s) and the problems of their head: a shipped one (`classifier`, or 08/10's
    `name`/`classifier` with a fallback trained on the notebook's prompts when missing or made for another pair), or
    one the notebook trains on a part of its prompts (02, 11: `classifier_prompts`, or the first `train_fraction` of
    each set, `sweeps.split_logbook`; the summary's `classifier_training_prompt_ids` / `scored_prompt_ids` when its
    last run had these prompts)."""
    keys = [q.key for q in scored]
    summary = ROOT / "figures" / notebook / "summary.json"
    made = json.loads(summary.read_text()) if summary.exists() else {}
    if made.get("prompts") == p.get("prompts") and "classifier_training_prompt_ids" in made:
        trained, held = made["classifier_training_prompt_ids"], made.get("scored_prompt_ids", keys)
        return [Component("its own C2T classifier (summary)", with_same_text(set(trained)), tuple(held))], []
    if p.get("classifier_prompts"):
        trained = [q.key for q in parse_prompt_spec(p["classifier_prompts"])]
        return [Component("its own C2T classifier", with_same_text(set(trained)), tuple(keys))], []
    if "train_fraction" in p:
        train, held = split_logbook([SimpleNamespace(prompt=q) for q in scored], p["train_fraction"])
        return [Component("its own C2T classifier", with_same_text({lp.prompt.key for lp in train}),
                          tuple(lp.prompt.key for lp in held))], []
    name = p.get("classifier") or (p.get("name") if notebook in NOT_SCORED else "") or implicit_classifier(notebook, p)
    if not name:
        return [], []
    path = C2T_DIR / f"{name}.safetensors"
    other = made_for_another_pair(path, p["pair"]) if path.exists() else None
    if notebook in NOT_SCORED:  # scores nothing with it
        return [], []
    if not path.exists() or other:
        if "classifier_epochs" in p:  # 10: a fallback trained on the very prompts it then scores
            return [Component(f"C2T classifier trained on {notebook}'s own prompts", frozenset(keys), tuple(keys))], []
        why = f"was trained on {other}'s trees" if other else "is missing"
        return [], [f"{notebook}: C2T classifier {name} {why}, not on those of its pair {p['pair']}"]
    card = json.loads(path.with_suffix(".json").read_text())
    return [Component(f"C2T classifier {name}", with_same_text(set(card["prompts"])), tuple(keys))], []


def implicit_classifier(notebook: str, p: dict) -> str:
    """The classifier a notebook that names none scores with, the one `token_tables.c2t_classifier_confidence` finds
    for its pair (05's calibration of C2T's confidence), or ''."""
    source = (ROOT / "notebooks" / f"{notebook}.ipynb").read_text()
    if "c2t_classifier_confidence(" not in source:
        return ""
    empty = pd.DataFrame({column: [] for column in FEATURES.values()}, dtype=float)
    confidences, name = c2t_classifier_confidence(empty, p["pair"], C2T_DIR)
    return name if confidences is not None else ""


def problems(notebook: str, p: dict) -> list[str]:
    """Every way notebook `notebook` run with parameters `p` scores a component on prompts it was trained or fitted
    on (or cannot be shown not to), one line each."""
    scored = scored_prompts(notebook, p)
    by_key = {q.key: q for q in scored}
    found, out = classifier(notebook, p, scored)
    keys = tuple(by_key)
    step = with_same_text({q.key for q in parse_prompt_spec(FIT_PROMPTS)})
    found.append(Component(f"the step model ({FIT_PROMPTS})", step, keys))
    from_sources = [q for q in scored if source_key(q).split("/", 1)[0] in TRAINING_SOURCES]
    for pair in notebook_pairs(p):
        card = draft_card(as_pair(pair).draft)
        if card is None:
            continue
        trained = card_keys(card)
        if trained is None and from_sources:
            out.append(f"{notebook}: draft {card.stem} of {pair} scores {from_sources[0].key} ({from_sources[0].dataset}"
                       f" is drawn from its training sources) but its card records no complete training_prompts: "
                       f"python -m spectree.training.provenance {card.stem}")
        elif trained is not None:
            found.append(Component(f"draft {card.stem} of {pair}", trained, keys))
    for c in found:
        leaked = sorted(k for k in c.scores if k in by_key and source_key(by_key[k]) in c.keys)
        if leaked:
            out.append(f"{notebook}: {c.name} was trained on {len(leaked)} prompt(s) it is scored on: "
                       f"{', '.join(leaked[:4])}{' …' if len(leaked) > 4 else ''}")
    return out


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_no_notebook_scores_a_component_on_prompts_it_was_trained_or_fitted_on(notebook: str, profile: str) -> None:
    assert problems(notebook, params(notebook, profile)) == []


def test_the_check_fails_when_scored_prompts_overlap_a_components_training_prompts(tmp_path, monkeypatch) -> None:
    """The check can fail: notebook 03 scoring its prompts with a classifier trained on them (as the one shipped
    before issue 66 was: mtbench:8+humaneval:8) or on another head's trees, a notebook scoring a first turn a shipped
    draft answered in training, one scoring the step model's own prompts, and notebook 02 training C2T on all."""
    p = params("03_speed_benchmark", "default")
    monkeypatch.setattr(sys.modules[__name__], "C2T_DIR", tmp_path)
    (tmp_path / "old.safetensors").write_bytes(b"")  # only its card is read
    trained = [q.key for q in parse_prompt_spec("mtbench:8+humaneval:8")]
    (tmp_path / "old.json").write_text(json.dumps({"pair": p["pair"], "prompts": trained}))
    found = problems("03_speed_benchmark", {**p, "prompts": "mtbench:4+humaneval:4", "classifier": "old"})
    assert len(found) == 1 and "C2T classifier old was trained on 8 prompt(s)" in found[0]
    (tmp_path / "old.json").write_text(json.dumps({"pair": "smollm2-edd", "prompts": []}))
    assert "not on those of its pair" in problems("03_speed_benchmark", {**p, "classifier": "old"})[0]
    save_classifier(C2TClassifier(), tmp_path / "smollm2-edd.safetensors", card={"pair": "smollm2-edd", "prompts": trained})
    found = problems("05_calibration", params("05_calibration", "default"))  # the one 05 finds for its pair
    assert len(found) == 1 and "C2T classifier smollm2-edd was trained on 16 prompt(s)" in found[0]
    edd = json.loads((ROOT / "data/drafts/smollm2-edd.json").read_text())["training_prompts"]["sharegpt"]
    index = {q.id: i for i, q in enumerate(load_prompts("sharegpt"))}[edd[0]]
    leak = {**p, "prompts": f"mtbench:1+sharegpt:1@{index}"}
    assert any("draft smollm2-edd" in line and f"sharegpt/{edd[0]}" in line for line in problems("03_speed_benchmark", leak))
    fit = {**params("12_retrieval", "default"), "other_prompts": FIT_PROMPTS}
    assert any("the step model" in line for line in problems("12_retrieval", fit))
    in_sample = {**params("02_tree_strategies", "default"), "prompts": "mtbench:4+humaneval:4",  # C2T fitted on
                 "classifier_prompts": "mtbench:2+humaneval:2", "train_fraction": 1.0}  # scored prompts: in sample
    assert any("its own C2T classifier" in line for line in problems("02_tree_strategies", in_sample))


def test_the_copy_set_holds_no_first_turn_a_shipped_draft_trained_on() -> None:
    """All of `copy` (the paper profile's copy:60 reached 3 such turns before `_copy` left them out), by text."""
    trained = with_same_text({f"sharegpt/{i}" for card in (ROOT / "data" / "drafts").glob("*.json")
                              for i in (json.loads(card.read_text()).get("training_prompts") or {}).get("sharegpt", [])})
    copy = load_prompts("copy")
    assert len(trained) > 14000 and len(copy) > 400
    assert [q.id for q in copy if q.id in trained] == []


@pytest.mark.parametrize("name", sorted(SHIPPED_DRAFTS))
def test_shipped_drafts_record_every_training_prompt(name: str) -> None:
    """The drafts that carry verdicts list their training prompts in full, as many as their recipe answered
    (recomputed from it, `training.provenance`), none from a held-out set."""
    card = json.loads((ROOT / "data" / "drafts" / f"{name}.json").read_text())
    ids = card["training_prompts"]
    assert ids.get("complete", True) and set(ids) <= {*TRAINING_SOURCES, "how"}
    sharegpt, pystdlib = SHIPPED_DRAFTS[name]
    assert len(ids["sharegpt"]) >= sharegpt and len(ids.get("pystdlib", [])) == pystdlib
    records = {str(r.get("id")) for r in load_sharegpt_conversations()[0]}  # a window's conversation may open
    assert set(ids["sharegpt"]) <= records  # with the assistant: every id is a record, not always a first turn
    assert set(ids.get("pystdlib", [])) <= {q.id for q in load_prompts("pystdlib")}


class Chars:
    """A tokenizer of one id per character (decodable), whose chat template joins the messages' contents."""

    name_or_path = "chars"

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=True):
        text = "\n".join(m["content"] for m in messages)
        return self(text)["input_ids"] if tokenize else text

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


def test_window_sources_name_the_conversation_each_training_window_was_cut_from(tmp_path, monkeypatch) -> None:
    from spectree.training.selfdistill import sharegpt_chunks, sharegpt_window_sources

    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    windows = sharegpt_chunks(Chars(), seq_len=1024, seed=5, n_chunks=60)
    sources = sharegpt_window_sources(Chars(), 1024, 5, 60)
    assert len(sources) == 60 and len(set(sources)) > 3
    records = {str(r.get("id")): "\n".join(t.get("value", "") for t in r["conversations"])
               for r in load_sharegpt_conversations()[0]}
    assert all("".join(map(chr, w)) in records[i] for w, i in zip(windows, sources))
    (tmp_path / "data" / "cache" / "train" / "sharegpt-chunks-1024-5-60.npy").unlink()  # the sources alone answer
    monkeypatch.setattr("spectree.training.selfdistill.load_sharegpt_conversations", None)  # ... without ShareGPT
    assert sharegpt_window_sources(Chars(), 1024, 5, 25) == sources[:25]  # a shorter run's: a prefix


def test_a_card_lists_the_prompts_a_run_answered_and_those_of_its_initial_weights(tmp_path, monkeypatch) -> None:
    from spectree.models import pairs
    from spectree.drafts.storage import card_json
    from spectree.training.provenance import exported_prompts
    from spectree.training.selfdistill import answer_prompt_keys, answer_prompts
    from spectree.training.training import TrainConfig

    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    monkeypatch.setattr(pairs, "target_tokenizer", lambda name: (Chars(), None))
    keys = answer_prompt_keys(Chars(), 1, 3, "pystdlib")
    texts = {q.id: q.text for q in load_prompts("pystdlib")}
    assert ["".join(map(chr, ids)) for ids in answer_prompts(Chars(), 1, 3, "pystdlib")] == [texts[k] for k in keys]
    cfg = TrainConfig(data="self", seed=1, self_prompts=4, self_code_prompts=3)
    (tmp_path / "start.json").write_text(json.dumps({"training_prompts": {"sharegpt": ["earlier"]}}))
    made = exported_prompts(cfg, 8, "t", {"from": "start.safetensors", "step": 0}, tmp_path)
    assert made["pystdlib"] == sorted(keys) and len(made["sharegpt"]) == 5 and "earlier" in made["sharegpt"]
    assert "complete" not in made and "initial weights" in made["how"]
    unknown = exported_prompts(cfg, 8, "t", {"from": "gone.safetensors", "step": 0}, tmp_path)
    assert unknown["complete"] is False  # a chain of runs not all known is not a complete record
    card = {"name": "d", "training_prompts": made, "loss_curve": [[1, 2.0, 3.0]]}
    assert json.loads(card_json(card)) == card and f'"pystdlib": {json.dumps(made["pystdlib"])}' in card_json(card)


def test_prompt_ids_come_from_the_prompt_cache_or_a_redraw_that_matches_it(tmp_path, monkeypatch) -> None:
    from spectree.core.errors import SpectreeError
    from spectree.training.selfdistill import (_save_seqs, answer_prompt_keys, answer_prompts, answers_folder,
                                             cached_answer_prompts)

    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    folder = answers_folder("pystdlib", 256, 2, 64)
    folder.mkdir(parents=True)
    drawn = answer_prompt_keys(Chars(), 2, 3, "pystdlib")  # no cache: drawn from the source
    _save_seqs(folder / "prompts.npz", answer_prompts(Chars(), 2, 3, "pystdlib"))  # a cache from before ids were kept
    assert answer_prompt_keys(Chars(), 2, 3, "pystdlib") == drawn
    _save_seqs(folder / "prompts.npz", [[7, 8, 9]] * 3)  # drawn elsewhere (another standard library)
    with pytest.raises(SpectreeError, match="other pystdlib prompts"):
        answer_prompt_keys(Chars(), 2, 3, "pystdlib")
    (folder / "prompts.npz").unlink()
    cached_answer_prompts(folder, Chars(), 2, 3, "pystdlib")  # made now: it keeps the ids
    monkeypatch.setattr("spectree.training.selfdistill.load_prompts", None)  # ... read back without the source
    assert answer_prompt_keys(Chars(), 2, 2, "pystdlib") == drawn[:2]

"""`tune` (`tune`, `python -m spectree tune`): each engine's grid is made of settings the engine accepts, the
search ranks them by projected speedup on a logbook with the engine's default beside them, a cost model comes from
the GPU checklist's file or a t(n) curve, the chosen setting comes out as the engine's config text, and the token map
is the file SGLang reads."""
from __future__ import annotations

import json

import pytest
import torch
import yaml
from helpers import refuse

from spectree.core.errors import SpectreeError
from spectree.prompts import Prompt
from spectree.replay.logbook import LogConfig, log_prompt
from spectree import tune
from spectree.strategies import parse_strategy


class Template:
    eos_token_id = 1

    def __init__(self, ids):
        self.ids = ids

    def apply_chat_template(self, messages, add_generation_prompt=True):
        return self.ids


CURVE = {"sizes": [1, 8, 64, 512], "target_s": [0.010, 0.011, 0.020, 0.100], "draft_s": [0.001, 0.001, 0.002, 0.01]}


@pytest.fixture(scope="module")
def logbook(tiny_target):
    """Logged with the engines' own logbook shape (sglang's) on a draft that often agrees: the target itself with a
    little noise is too slow to build here, so its own first two layers (a layer-skip draft)."""
    from spectree.drafts.draftspec import layerskip_draft

    cfg = LogConfig(pair="toy", max_new_tokens=16, K=4, d_max=5, beam=4, b_env=2, d_env=3)
    draft = layerskip_draft(tiny_target, 2)
    return [log_prompt(tiny_target, draft, Template(ids), Prompt("toy", str(i), "c", "x"), cfg, eos_ids=())
            for i, ids in enumerate([[3, 14, 15, 92], [2, 71, 82], [5, 5, 6, 9]])]


@pytest.fixture(scope="module")
def cost(tmp_path_factory):
    path = tmp_path_factory.mktemp("cost") / "curve.json"
    path.write_text(json.dumps(CURVE))
    return tune.load_cost_model(str(path))[0]


def test_every_grid_setting_is_one_its_engine_accepts():
    for engine in tune.ENGINES.values():
        specs = [p.spec for p in engine.grid()]
        assert len(specs) == len(set(specs)) > (5 if engine.name == "vllm" else 20)
        assert all(parse_strategy(s).spec == s for s in specs)  # each parses back (the engines' own checks pass)
        for policy in [engine.default, *engine.grid()]:
            policy.engine_config(engine.name)  # each can be written as the engine's config (none is refused)
    assert all(p.topk > 1 or p.tokens == p.steps + 1 for p in tune.sglang_grid())
    assert tune.ENGINES["sglang"].default.spec == "sglang"  # (5, 4, 8): SGLang's choice for a Llama target
    chains = [json.loads(p.engine_config("vllm"))["num_speculative_tokens"] for p in tune.vllm_grid()]
    assert chains == list(tune.DEPTHS)  # vLLM: chains only


def test_vllms_own_logbook_replays_its_whole_grid(tiny_target, cost):
    """vLLM's grid is chains: its logbook shape (`ENGINES['vllm'].log`) logs the rank-0 chain and little else, and
    every chain of the grid and its default replay on it."""
    from dataclasses import replace

    from spectree.drafts.draftspec import layerskip_draft

    cfg = replace(tune.ENGINES["vllm"].log, pair="toy", max_new_tokens=12)
    draft = layerskip_draft(tiny_target, 2)
    logged = [log_prompt(tiny_target, draft, Template(ids), Prompt("toy", str(i), "c", "x"), cfg, eos_ids=())
              for i, ids in enumerate([[3, 14, 15, 92], [2, 71, 82]])]
    table, skipped = tune.tune(logged, tune.ENGINES["vllm"], cost, progress=False)
    assert not skipped and len(table) == len(tune.vllm_grid()) and table.default.sum() == 1


def test_tune_ranks_the_grid_and_shows_the_default(logbook, cost):
    engine = tune.ENGINES["sglang"]
    table, skipped = tune.tune(logbook, engine, cost, progress=False)
    assert table.speedup.is_monotonic_decreasing and table.default.sum() == 1
    assert all(s.startswith("sglang") for s in table.spec) and table.tau.min() >= 1
    assert any("but the logbook holds K=4, d_max=5" in why for why in skipped.values())  # topk 8, steps 6+
    assert all("logbook holds" in why or "not expanded in the logbook" in why for why in skipped.values())
    lines = tune.summary_lines(table, engine, top=3)
    assert lines[1].split()[1] == table.spec[0] and any("← the engine's default" in line for line in lines)
    report = tune.tune_report(table, skipped, engine, "test curve")
    assert report["best"] == table.spec[0] and report["gain_over_default"] == pytest.approx(
        table.speedup[0] / table[table.default].speedup.iloc[0] - 1)


def test_the_cost_model_decides_the_tree(logbook, tmp_path):
    """A t(n) curve where verifying 64 tokens costs as much as one favours wide trees; one where each token costs
    its own forward favours chains."""
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"sizes": [1, 512], "target_s": [0.01, 0.01], "draft_s": [0.0001, 0.0001]}))
    linear = tmp_path / "linear.json"
    linear.write_text(json.dumps({"sizes": [1, 512], "target_s": [0.01, 5.12], "draft_s": [0.0001, 0.05]}))
    engine = tune.ENGINES["sglang"]
    wide = tune.tune(logbook, engine, tune.load_cost_model(str(flat))[0], progress=False)[0]
    narrow = tune.tune(logbook, engine, tune.load_cost_model(str(linear))[0], progress=False)[0]
    assert wide.gamma.iloc[0] > narrow.gamma.iloc[0]


def test_gpu_checklist_cost_models_and_bad_files(tmp_path):
    path = tmp_path / "costmodel.json"
    shapes = {s: {"target_s": {"256": [0.01 * (i + 1), 0.02 * (i + 1)]}, "draft_s": [0.001, 0.002],
                  "graphs": {"target_s": {"256": [0.003 * (i + 1), 0.004 * (i + 1)]}, "draft_s": [0.0005, 0.001]}}
              for i, s in enumerate(["small", "big"])}
    path.write_text(json.dumps({"machine": "m", "device": "NVIDIA H100", "sizes": [1, 64], "prefixes": [256],
                                "shapes": shapes}))
    model, origin = tune.load_cost_model(str(path))
    assert model.target_s == [0.02, 0.04] and "big-shaped" in origin and "NVIDIA H100" in origin
    assert tune.load_cost_model(f"{path}:small")[0].target_s == [0.01, 0.02]
    assert tune.load_cost_model(f"{path}:small:eager")[0].target_s == [0.01, 0.02]
    graphs, origin = tune.load_cost_model(f"{path}:big:graphs")  # the engines' regime: CUDA graphs
    assert graphs.target_s == [0.006, 0.008] and "CUDA graphs" in origin
    with pytest.raises(SpectreeError, match="no shape 'huge'"):
        tune.load_cost_model(f"{path}:huge")
    with pytest.raises(SpectreeError, match="no shape 'small' in regime 'compiled' .* small:eager, small:graphs"):
        tune.load_cost_model(f"{path}:small:compiled")
    (tmp_path / "bad.json").write_text(json.dumps({"sizes": [2], "target_s": [1.0], "draft_s": [1.0]}))
    with pytest.raises(SpectreeError, match="expected the GPU checklist's costmodel.json or"):
        tune.load_cost_model(str(tmp_path / "bad.json"))
    with pytest.raises(SpectreeError, match="not a readable JSON file"):
        tune.load_cost_model(str(tmp_path / "absent.json"))


def test_the_token_map_is_the_file_sglang_reads(tmp_path):
    from spectree.drafts.draftspec import draft_vocab

    path = tune.write_token_map("smollm2-135m-instruct+edd:smollm2-edd@8192", tmp_path / "map.pt")
    ids = torch.load(path, weights_only=True)  # as SGLang's spec_utils.load_token_map reads it
    assert ids.dtype == torch.int64 and ids.shape == (8192,) and torch.equal(ids, draft_vocab("edd:smollm2-edd@8192"))
    with pytest.raises(SpectreeError, match="full head"):
        tune.write_token_map("smollm2-edd", tmp_path / "full.pt")


def test_tune_command_prints_the_setting_to_paste(logbook, tmp_path, capsys, monkeypatch):
    from spectree.cli import main
    from spectree.replay.logbook import _to_parquet_bytes

    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path / "home"))
    folder = tmp_path / "book"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"pair": "smollm2-edd", "max_new_tokens": 16, "K": 4, "d_max": 5,
                                                    "beam": 4, "b_env": 2, "d_env": 3}))
    for i, lp in enumerate(logbook):
        (folder / f"{i:04d}.parquet").write_bytes(_to_parquet_bytes(lp))
    curve = tmp_path / "curve.json"
    curve.write_text(json.dumps(CURVE))
    out = tmp_path / "tune.json"
    assert main(["tune", "--engine", "trtllm", "--logbook", str(folder), "--cost-model", str(curve),
                 "--draft-model", "/models/eagle", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "trtllm on book (3 prompts, pair smollm2-edd)" in printed and "the best setting as trtllm takes it" in printed
    config = yaml.safe_load(printed.split("takes it:\n", 1)[1].split("\nwrote ")[0])["speculative_config"]
    assert config["speculative_model"] == "/models/eagle"
    assert config.get("use_dynamic_tree") is True or "eagle_choices" in config
    report = json.loads(out.read_text())
    assert report["best"] == report["rows"][0]["spec"] and report["default"] == "trtllm"


@pytest.mark.parametrize("argv, message", [
    (["tune", "--engine", "tgi"], "argument --engine: invalid choice: 'tgi'"),
    (["tune", "--engine", "sglang"], "give --logbook, or --pair and --prompts"),
    (["tune", "--engine", "sglang", "--logbook", "nowhere"], "--logbook nowhere: no logbook there"),
    (["tune", "--engine", "sglang", "--pair", "smollm2-layerskip", "--prompts", "mtbench:2", "--cost-model", "absent.json"],
     "--cost-model absent.json: not a readable JSON file"),
    (["tune", "--engine", "sglang", "--pair", "smollm2-layerskip", "--prompts", "mtbench:2", "--token-map", "map.pt"],
     "--token-map: pair smollm2-layerskip's draft has its full head"),
])
def test_bad_tune_input_is_one_line_before_any_model_loads(argv, message, tmp_path, capsys, monkeypatch):
    from helpers import offline_home

    root = offline_home(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert message in refuse(argv, capsys, root)


def test_tune_logs_an_even_spread_of_a_long_prompt_file():
    prompts = list(range(80))  # e.g. MT-bench's 80 questions, ten per category in file order
    picked = tune.spread(prompts, 16)
    assert len(picked) == 16 and picked == sorted(set(picked)) and picked[:3] == [0, 5, 10]
    assert {p // 10 for p in picked} == set(range(8))  # every category drawn
    assert tune.spread(prompts[:5], 16) == prompts[:5]


def test_the_held_out_claim_reads_projected_tokens_per_second_with_our_bar_as_the_goal():
    import pandas as pd

    prompts = [f"p{i}" for i in range(8)]
    rows = pd.DataFrame([{"label": label, "prompt": p, "tokens": 64, "seconds": s * (1 + 0.01 * i)}
                         for label, s in [("tuned", 4.0), ("default", 6.0)] for i, p in enumerate(prompts)])
    won = tune.held_out_claim(rows, "sglang:steps=2", "sglang:", "sglang", "λ 0, this CPU")
    assert won["verdict"] == "holds" and "1.50×" in won["ours"]
    assert won["paper"] == "—" and "1.1" in won["goal"]  # no paper states a bar for an engine's default
    lost = tune.held_out_claim(rows.assign(seconds=5.0), "sglang:steps=2", "sglang:", "sglang", "λ 0, this CPU")
    assert lost["verdict"] == "does not hold"
    same = tune.held_out_claim(rows.assign(seconds=5.0), "sglang:", "sglang:", "sglang", "λ 0, this CPU")
    assert same["verdict"] == "does not hold" and "no setting above the default (sglang:)" in same["ours"]
    assert won["kind"] == lost["kind"] == "bar"  # an engine's tuning is our goal, tallied apart from the papers'
    assert won["details"]["prompts"] == prompts  # the held-out prompts it was judged on
    few = tune.held_out_claim(rows[rows.prompt.isin(prompts[:6])], "sglang:steps=2", "sglang:", "sglang", "λ 0")
    assert few["verdict"] == "inconclusive" and few["n"] == 6  # 1.50× on 6 prompts decides nothing

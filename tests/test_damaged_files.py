"""Damaged files and names that leave their folder: one line that says the fix (a shipped file: `git checkout`),
before any model loads and before anything is written (the rest of the refusals: test_errors.py)."""
import shutil
import subprocess

import pytest
import torch
from helpers import files, offline_home, refuse

from spectree.core.errors import SpectreeError
from spectree.core.paths import check_safetensors
from spectree.prompts import Prompt
from spectree.replay.logbook import LogConfig, write_logbook

PAIR = "smollm2-135m-instruct"
PROMPT = Prompt("toy", "0", "toy", "x")


@pytest.fixture
def home(tmp_path, monkeypatch):
    return offline_home(tmp_path, monkeypatch)


@pytest.mark.parametrize("tracked", [True, False])
def test_a_damaged_draft_says_how_to_restore_it(tracked, home, capsys):
    if tracked and shutil.which("git") is None:
        pytest.skip("git is not installed")
    (home / "data" / "drafts").mkdir(parents=True)
    (home / "data" / "drafts" / "d.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    if tracked:  # a shipped draft: committed under data/drafts
        subprocess.run(["git", "init", "-q"], cwd=home, check=True)
        subprocess.run(["git", "add", "data/drafts/d.safetensors"], cwd=home, check=True)
    err = refuse(["acceptance", "--pair", f"{PAIR}+edd:d"], capsys, home)
    if tracked:
        assert "restore it with `git checkout -- data/drafts/d.safetensors`" in err and "delete" not in err
    else:
        assert "re-export it with `python -m spectree train --name d --export`" in err


def test_missing_draft_metadata_and_an_empty_token_ranking_get_one_line(home, capsys):
    from safetensors.torch import save_file

    drafts = home / "data" / "drafts"
    drafts.mkdir(parents=True)
    save_file({"w": torch.zeros(2)}, str(drafts / "bare.safetensors"))
    assert "lacks the metadata that says what it holds" in refuse(["bench", "--pair", f"{PAIR}+edd:bare"], capsys, home)
    save_file({"w": torch.zeros(2)}, str(drafts / "d.safetensors"), metadata={"kind": "vdm", "hidden_layer": "27"})
    assert "no token ranking d.vocab.npy" in refuse(["acceptance", "--pair", f"{PAIR}+vdm:d@100"], capsys, home)
    (drafts / "d.vocab.npy").write_bytes(b"")
    assert "d.vocab.npy is not a readable token ranking" in refuse(["bench", "--pair", f"{PAIR}+vdm:d@100"], capsys, home)


@pytest.mark.parametrize("argv", [["train", "--name", "../x"], ["train", "--name", "a/b"], ["log", "--name", "../x"],
                                  ["log", "--name", "a/b"], ["bench", "--strategies", "c2t:classifier=../x"],
                                  ["replay", "x", "--strategies", "c2t:classifier=a/b"]])
def test_names_that_leave_their_folder_are_refused(argv, home, capsys):
    err = refuse(argv, capsys, home)
    assert "name '" in err and "(no '/' or '..')" in err


def test_python_api_refuses_the_same_names(home, tmp_path):
    from spectree.training.training import TrainConfig, train
    from spectree.strategies.c2t import C2T

    before = files(home)
    with pytest.raises(SpectreeError, match="bad logbook name '../x'"):
        write_logbook([PROMPT], LogConfig(), "../x")
    with pytest.raises(SpectreeError, match="bad draft name 'a/b'"):
        train("a/b", TrainConfig(), None, None)
    with pytest.raises(SpectreeError, match="bad C2T classifier name"):
        C2T(classifier="../../x")
    assert files(home) == before


def test_corrupt_and_truncated_safetensors_are_reported(tmp_path):
    from safetensors.torch import save_file

    bad = tmp_path / "model.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    with pytest.raises(SpectreeError, match="not a readable safetensors.*delete it to rebuild"):
        check_safetensors(bad)
    save_file({"w": torch.zeros(1000)}, str(bad))
    bad.write_bytes(bad.read_bytes()[:-100])
    with pytest.raises(SpectreeError, match="truncated|not a readable"):
        check_safetensors(bad)


def test_corrupt_logbook_file_is_reported(tmp_path):
    from spectree.replay.logbook import read_logbook

    (tmp_path / "0000.parquet").write_bytes(b"PAR1 garbage")
    with pytest.raises(SpectreeError, match="not a readable logbook"):
        read_logbook(tmp_path)
    with pytest.raises(SpectreeError, match="no logbook"):
        read_logbook(tmp_path / "empty")

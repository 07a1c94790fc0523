"""Any causal LM a researcher brings, through the command line at its defaults (no --device, no --dtype): tiny random
folders of a sliding-window family (Mistral) and a hybrid one (Gemma-3) with themselves as draft are exact against HF
`generate` on prompts over their window; a base model without a chat template decodes its prompts as raw text and
says so once (`--chat` refuses it in one line, `--no-chat` asks for raw text from a chat model); a GGUF file is a
TARGET (checked, dequantised once, cached with its manifest; a truncated one refused in one line before any load);
and `acceptance` runs with the default device also where the worker count is worked out for it."""
from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import torch
from families import TEXT, WINDOW, family_folder
from helpers import LOADERS, no_model, refuse

from spectree.cli import main
from spectree.models import gguf, pairs

NEW = "10"  # --max-new-tokens
STRATEGIES = ["chain:k=3", "eagle2:K=4,d_max=3,N=12", "dyspec:m=8,K=4,d_max=4"]
RAW_NOTE = "spectree: prompts go in as raw text, BOS as the tokenizer adds it"


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    assert "Traceback" not in err.getvalue(), err.getvalue()
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Folders of tiny models (the tracked SmolLM2 tokenizer) and a prompt file of two texts over four windows each,
    in a SPECTREE_HOME of their own."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("families")
    for family, chat in (("mistral", True), ("gemma3", True), ("llama", True), ("llama", False)):
        family_folder(root, family, chat=chat)  # the tracked tokenizer read from this repository's data/
    prompts = root / "prompts.jsonl"
    words = (TEXT * 6).split()
    prompts.write_text("".join(json.dumps({"prompt": " ".join(words[i:i + 80])}) + "\n" for i in (0, 13)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPECTREE_HOME", str(root / "home"))
        (root / "home" / "data" / "cache").mkdir(parents=True)
        yield root, ["--prompts", f"jsonl:{prompts}", "--max-new-tokens", NEW]
    torch.set_num_threads(threads)


@pytest.mark.parametrize("family", ["mistral", "gemma3"])
def test_a_sliding_window_folder_is_exact_with_itself_as_draft_at_the_default_device(family, world):
    root, common = world
    folder = family_folder(root, family)
    from spectree.models.pairs import target_tokenizer
    from spectree.prompts import chat_ids

    tok, config = target_tokenizer(str(folder))
    texts = [json.loads(line)["prompt"] for line in Path(common[1].removeprefix("jsonl:")).read_text().splitlines()]
    assert config.sliding_window == WINDOW and all(len(chat_ids(tok, text)) > 4 * WINDOW for text in texts)
    code, out, err = run(["lossless", "--pair", f"{folder}+hf:{folder}", *common, "--strategies", *STRATEGIES])
    assert code == 0 and "6/6 generations match HF generate exactly; 0 mismatches" in out, out + err
    assert RAW_NOTE not in err  # a chat template: prompts as user turns


def test_a_base_model_decodes_raw_text_and_says_so_once(world, capsys, monkeypatch):
    root, common = world
    base, chat = family_folder(root, "llama", chat=False), family_folder(root, "llama")
    code, out, err = run(["lossless", "--pair", f"{base}+layerskip:2", *common, "--strategies", "chain:k=3"])
    assert code == 0 and "2/2 generations match" in out, out + err
    assert err.count(RAW_NOTE) == 1 and "has no chat template (a base model)" in err, err
    code, out, err = run(["lossless", "--pair", f"{chat}+layerskip:2", *common, "--strategies", "chain:k=3",
                          "--no-chat"])
    assert code == 0 and "2/2 generations match" in out and f"{RAW_NOTE}: --no-chat" in err, out + err
    for loader in LOADERS:  # refused before any model loads
        monkeypatch.setattr(loader, no_model)
    assert "--chat: the target's tokenizer has no chat template" in refuse(
        ["lossless", "--pair", f"{base}+layerskip:2", *common, "--chat"], capsys)


def test_raw_prompts_are_the_tokenizers_own_ids_bos_included(world, monkeypatch):
    from tiny_gguf import BOS_ID, write_tiny_llama_gguf

    from spectree.models.gguf import load_gguf
    from transformers import AutoTokenizer

    from spectree.prompts import CHAT_ENV, chat_ids

    root, _ = world
    path = root / "bos" / "tiny.gguf"
    path.parent.mkdir()
    write_tiny_llama_gguf(path)
    tok = load_gguf(path)[1]  # a base tokenizer that adds BOS, no chat template
    assert tok.chat_template is None and chat_ids(tok, "the cat") == tok("the cat").input_ids
    assert chat_ids(tok, "the cat")[0] == BOS_ID
    smol = AutoTokenizer.from_pretrained(family_folder(root, "llama"))  # SmolLM2's, with its chat template
    templated = chat_ids(smol, "the cat")
    monkeypatch.setenv(CHAT_ENV, "no")
    assert chat_ids(smol, "the cat") == smol("the cat").input_ids != templated


def test_a_gguf_file_is_a_target_dequantised_once_and_cached_with_its_manifest(world, capsys, monkeypatch):
    from tiny_gguf import write_tiny_llama_gguf

    from spectree.core.paths import cache_dir

    root, _ = world
    path = root / "gguf" / "tiny.gguf"
    path.parent.mkdir()
    write_tiny_llama_gguf(path, layers=3)  # a letter-level vocabulary and 256 positions: short prompts
    prompts = root / "gguf" / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in ("the cat sat on the mat", "in the inn")))
    common = ["--prompts", f"jsonl:{prompts}", "--max-new-tokens", NEW]
    built = []
    real = gguf.load_gguf
    monkeypatch.setattr(pairs, "load_gguf", lambda *a, **k: built.append(1) or real(*a, **k))
    for _ in range(2):
        code, out, err = run(["lossless", "--pair", f"{path}+layerskip:1", *common, "--strategies", *STRATEGIES[:2]])
        assert code == 0 and "4/4 generations match HF generate exactly" in out, out + err
    assert len(built) == 1  # the second run reads the cached copy
    [copy] = (cache_dir() / "models").glob("gguf-tiny-*")
    assert json.loads((copy / "source.json").read_text())["gguf"] == str(path.resolve())
    assert pairs.target_digest(f"{path}+layerskip:1").startswith("tiny.gguf@")
    cut = root / "gguf" / "cut.gguf"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    for loader in LOADERS:
        monkeypatch.setattr(loader, no_model)
    assert "cut.gguf is truncated" in refuse(["lossless", "--pair", f"{cut}+layerskip:1", *common], capsys)


def test_acceptance_runs_at_the_default_device_with_its_own_worker_count(world, monkeypatch):
    """The README's command shape, no --device: the worker count is worked out for 'auto' (here one job: no spawn)."""
    from spectree.core.workers import ENV, worker_count

    root, common = world
    monkeypatch.delenv(ENV, raising=False)
    assert worker_count("auto") == worker_count(None) == worker_count("cuda" if torch.cuda.is_available() else "cpu")
    folder = family_folder(root, "llama")
    code, out, err = run(["acceptance", "--pair", f"{folder}+layerskip:2", *common, "--depth", "2"])
    assert code == 0 and "chain-2 τ" in out, out + err

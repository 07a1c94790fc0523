"""A draft for one's own base model: `train` on a checkpoint whose tokenizer has no chat template feeds its text as
decoding feeds prompts (raw text, BOS as the tokenizer adds it, `prompts.chat_ids`), says so once in decoding's own
line, and the exported EDD draft decodes that target exactly (greedy speculative output == HF generate, lengths too)."""
from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import torch
from families import TEXT, family_folder

from spectree.cli import main

RAW_NOTE = ("spectree: prompts go in as raw text, BOS as the tokenizer adds it: the target's tokenizer has no chat "
            "template (a base model)")
STRATEGIES = ["chain:k=3", "eagle2:K=3,d_max=3,N=6"]


def run(argv: list[str]) -> tuple[int, str, str]:
    """`main(argv)` with its stdout and stderr; a traceback fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_a_draft_trained_on_a_base_model_reads_raw_text_and_decodes_it_exactly(tmp_path, monkeypatch):
    from spectree.core.paths import cache_dir
    from spectree.models.pairs import target_tokenizer
    from spectree.training.selfdistill import sharegpt_window_sources
    from spectree.prompts import chat_ids, load_sharegpt_conversations

    base = family_folder(tmp_path, "llama", layers=3, chat=False)  # the tracked SmolLM2 tokenizer, no template
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "data" / "cache").mkdir(parents=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: one thread is faster, on a busy machine most
    try:
        tok, _ = target_tokenizer(str(base))
        assert tok.chat_template is None
        code, out, err = run(["train", "--name", "base-edd", "--target", str(base), "--kind", "edd", "--steps", "3",
                              "--seq-len", "32", "--batch", "2", "--warmup", "1", "--block-min", "2", "--block-max",
                              "3", "--export"])
        assert code == 0, out + err
        assert err.count(RAW_NOTE) == 1, err

        (path,) = cache_dir().glob("train/sharegpt-chunks-*.npy")  # the windows it trained on, in order
        first = np.load(path)[0].tolist()
        (record,) = [r for r in load_sharegpt_conversations()[0]
                     if str(r.get("id")) == sharegpt_window_sources(tok, 32, 0, 1)[0]]
        text = [t for turn in record["conversations"] for t in chat_ids(tok, turn["value"])]  # each turn as a prompt
        assert first == text[:32]
        card = json.loads((tmp_path / "home" / "data" / "drafts" / "base-edd.json").read_text())
        assert card["data"] == "ShareGPT V3 (complete records), raw text" and card["steps"] == 3

        prompts = tmp_path / "prompts.jsonl"
        words = TEXT.split()
        prompts.write_text("".join(json.dumps({"prompt": " ".join(words[i:i + 12])}) + "\n" for i in (0, 9)))
        code, out, err = run(["lossless", "--pair", f"{base}+edd:base-edd", "--prompts", f"jsonl:{prompts}",
                              "--max-new-tokens", "16", "--strategies", *STRATEGIES])
        assert code == 0 and "4/4 generations match HF generate exactly; 0 mismatches" in out, out + err
        assert err.count(RAW_NOTE) == 1, err
    finally:
        torch.set_num_threads(threads)


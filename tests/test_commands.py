"""Every command × every draft kind, in process (`spectree.cli.main`), on a tiny folder pair: a 3-layer random Llama
target with a byte-level tokenizer and each kind of draft beside it: `layerskip:1`, `edd:` and `vdm:` checkpoints
distilled by the `train` command itself (2 steps on ShareGPT windows, exported into a temporary SPECTREE_HOME), an
`hf:` folder (a 1-layer random Llama), an `eagle:` head folder, and `mix:λ:DRAFT` over a real draft. Each command
either serves a kind (exit 0 and its output) or refuses it in one line `spectree: error: ...` (exit 2) before any
model loads; never a traceback. Every command runs at its default device and dtype (no --device, no --dtype).
`acceptance`'s chain τ equals that of the same kind's logbook replayed."""
from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers import LOADERS, eagle_config, eagle_weights, no_model, own_pair_folders, refuse, write_head

from spectree.cli import main
from spectree.models import pairs

pytestmark = pytest.mark.filterwarnings("ignore:the machine was busy")  # bench's timings: not what is tested here

COMMANDS = ("acceptance", "bench", "lossless", "log", "replay", "strategies", "train", "try", "tune")
KINDS = {  # kind → draft spec ({draft}: the hf: folder, {head}: the EAGLE head folder)
    "layerskip": "layerskip:1",
    "edd": "edd:tiny-edd",
    "vdm": "vdm:tiny-vdm",
    "hf": "hf:{draft}",
    "eagle": "eagle:{head}",
    "mix-edd": "mix:0.6:edd:tiny-edd",
    "mix-hf": "mix:0.6:hf:{draft}",
    "mix-eagle": "mix:0.6:eagle:{head}",
}
TRAINED = {"edd": "tiny-edd", "vdm": "tiny-vdm"}  # the kinds `train` distils, and their names
PRECISION = {"edd": "fp16", "vdm": "int8"}  # how `train --export` stores each (drafts.storage): both are served
STANDALONE = ("layerskip", "vdm", "hf")  # drafts HF assisted generation can take as its assistant_model
STRATEGIES = ["chain:k=2", "eagle2:K=3,d_max=3,N=6"]
PROMPTS = ["Write a haiku about trees.", "def f(x): return x * 2  # explain"]
NEW = 8  # --max-new-tokens


@dataclass
class Ran:
    code: int
    out: str
    err: str


def run(argv: list[str]) -> Ran:
    """`main(argv)` with its stdout and stderr; an exception (a traceback) fails the test that ran it."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse's refusals
            code = stop.code
    return Ran(code, out.getvalue(), err.getvalue())


def served(ran: Ran) -> str:
    assert ran.code == 0 and "Traceback" not in ran.err, ran.err
    return ran.out


class World:
    """The tiny pair's folders, a SPECTREE_HOME of its own, and what the commands made there (trained drafts,
    logbooks), each made once, on first use, whatever order the tests run in."""

    def __init__(self, root: Path):
        self.root, self.home = root, root / "home"
        (self.home / "data" / "cache").mkdir(parents=True)
        self.target, self.draft = own_pair_folders(root)
        from transformers import AutoConfig

        config = SimpleNamespace(config=AutoConfig.from_pretrained(self.target))  # all the head builders read
        self.head = write_head(root / "head", eagle_config(config), eagle_weights(config))
        self.prompts = root / "prompts.jsonl"
        self.prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
        # no --device, no --dtype: every command runs at its defaults (auto: CUDA when present, else the CPU)
        self.common = ["--prompts", f"jsonl:{self.prompts}", "--max-new-tokens", str(NEW)]
        self._trained: dict[str, Ran] = {}
        self._logged: dict[str, tuple[Ran, Path]] = {}

    def train_argv(self, kind: str, *extra: str) -> list[str]:
        return ["train", "--name", TRAINED.get(kind, f"tiny-{kind}"), "--target", str(self.target), "--kind",
                kind.partition("-")[0], "--steps", "2", "--seq-len", "16", "--batch", "1", "--warmup", "1",
                "--block-min", "2", "--block-max", "3", *extra]

    def trained(self, kind: str) -> Ran:
        """`train --kind edd|vdm ... --export`: the checkpoint data/drafts/tiny-<kind>.safetensors."""
        if kind not in self._trained:
            self._trained[kind] = run(self.train_argv(kind, "--export", "--precision", PRECISION[kind]))
        return self._trained[kind]

    def pair(self, kind: str) -> str:
        spec = KINDS[kind].format(draft=self.draft, head=self.head)
        for trained, name in TRAINED.items():
            if f"{trained}:{name}" in spec:
                served(self.trained(trained))
        return f"{self.target}+{spec}"

    def logged(self, kind: str) -> tuple[Ran, Path]:
        """`log --name lb-<kind>` on the kind's pair, and the logbook folder it printed."""
        if kind not in self._logged:
            ran = run(["log", "--pair", self.pair(kind), *self.common, "--K", "3", "--d-max", "3", "--beam", "4",
                       "--b-env", "1", "--d-env", "1", "--name", f"lb-{kind}"])
            self._logged[kind] = ran, Path(served(ran).strip().splitlines()[-1])
        return self._logged[kind]

    def replayed(self, kind: str, out: Path, *strategies: str) -> dict[str, dict]:
        """`replay` of the kind's logbook: its rows by strategy."""
        ran = run(["replay", str(self.logged(kind)[1]), "--strategies", *strategies, "--json", str(out)])
        assert f"logged trees ({len(PROMPTS)} prompts)" in served(ran)
        return {r["strategy"]: r for r in json.loads(out.read_text())["rows"]}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is several times faster than two, on a busy machine most
    try:
        with pytest.MonkeyPatch.context() as mp:
            root = tmp_path_factory.mktemp("commands")
            mp.setenv("SPECTREE_HOME", str(root / "home"))
            yield World(root)
    finally:
        torch.set_num_threads(threads)


def forbid_loading(monkeypatch) -> None:
    """Every model loader fails the test: a refusal must come before any load."""
    for loader in LOADERS:
        monkeypatch.setattr(loader, no_model)


def is_mix(kind: str) -> bool:
    return kind.startswith("mix")


# --- the commands, one test per (command, kind) ------------------------------------------------------------------

def acceptance(world: World, kind: str, tmp_path: Path, capsys, monkeypatch) -> None:
    """Agreement by draft position; its chain-2 τ is exactly the τ of chain:k=2 replayed on the kind's logbook."""
    pair, out = world.pair(kind), tmp_path / "acceptance.json"
    printed = served(run(["acceptance", "--pair", pair, *world.common, "--depth", "2", "--json", str(out)]))
    assert printed.startswith(f"{pair} jsonl:prompts: top-1 by position [") and "chain-2 τ" in printed, printed
    report = json.loads(out.read_text())
    assert report["prompts"] == len(PROMPTS) and 1 <= report["positions"] <= len(PROMPTS) * NEW
    assert len(report["top1_by_position"]) == 2 and all(0 <= a <= 1 for a in report["top1_by_position"])
    replayed = world.replayed(kind, tmp_path / "replay.json", "chain:k=2")["chain:k=2"]
    assert report["tau_chain"] == pytest.approx(replayed["tau"]), (report["by_prompt"], replayed)


def bench(world: World, kind: str, tmp_path: Path, capsys, monkeypatch) -> None:
    """A table of HF generate and each strategy, every output equal to HF's; a mix draft's rows are synthetic (τ and γ
    only: its wall time is no draft's)."""
    pair, out = world.pair(kind), tmp_path / "bench.json"
    printed = served(run(["bench", "--pair", pair, *world.common, "--strategies", *STRATEGIES, "--json", str(out)]))
    assert printed.startswith(f"pair={pair} prompts=jsonl:{world.prompts} ({len(PROMPTS)})"), printed
    assert all(s in printed for s in ("hf-generate", *STRATEGIES, "speedup", "tau"))
    rows = {r["strategy"]: r for r in json.loads(out.read_text())["rows"]}
    references = [s for s in rows if s.startswith("hf-generate")]  # stock, and packed where `--kernels auto` packs
    assert references[0] == "hf-generate" and list(rows) == [*references, *STRATEGIES]
    assert all(r["exact"] == 1.0 for r in rows.values()) and not any(rows[s].get("synthetic") for s in references)
    for spec in STRATEGIES:
        assert rows[spec].get("synthetic", False) == is_mix(kind) and rows[spec]["tau"] >= 1
        assert math.isnan(rows[spec]["speedup"]) == is_mix(kind)
    assert ("synthetic" in printed.splitlines()[1]) == is_mix(kind)


def lossless(world: World, kind: str, tmp_path: Path, capsys, monkeypatch) -> None:
    printed = served(run(["lossless", "--pair", world.pair(kind), *world.common, "--strategies", *STRATEGIES]))
    n = len(PROMPTS) * len(STRATEGIES)
    assert f"{n}/{n} generations match HF generate exactly; 0 mismatches" in printed, printed


def log(world: World, kind: str, tmp_path: Path, capsys, monkeypatch) -> None:
    from spectree.core.paths import cache_dir
    from spectree.replay.logbook import read_logbook

    _, logdir = world.logged(kind)
    pair = world.pair(kind)
    assert logdir.parent == cache_dir() / "logbooks" and logdir.name.startswith(pairs.pair_tag(pair) + "-lb-")
    assert len(read_logbook(logdir)) == len(PROMPTS)
    assert json.loads((logdir / "manifest.json").read_text())["draft"] == pairs.draft_digest(pair)


def replay(world: World, kind: str, tmp_path: Path, capsys, monkeypatch) -> None:
    rows = world.replayed(kind, tmp_path / "replay.json", *STRATEGIES)
    assert list(rows) == STRATEGIES and all(r["steps"] > 0 and r["tau"] >= 1 for r in rows.values())
    assert rows["chain:k=2"]["gamma"] == 2.0  # every logged tree holds the chain


def train(world: World, kind: str, tmp_path: Path, capsys, monkeypatch) -> None:
    """`train` distils EDD and VDM drafts (here as the fixture made them: exported, then resumed with nothing left to
    do); any other kind is refused by `--kind`'s choices."""
    from spectree.drafts.draftspec import check_draft_file
    from spectree.training.training import training_log

    if kind not in TRAINED:
        forbid_loading(monkeypatch)
        err = refuse(world.train_argv(kind), capsys, world.home)
        assert f"argument --kind: invalid choice: '{kind.partition('-')[0]}'" in err and "edd" in err, err
        return
    checkpoint = world.home / "data" / "drafts" / f"{TRAINED[kind]}.safetensors"
    assert served(world.trained(kind)).strip().splitlines()[-1] == str(checkpoint)
    assert check_draft_file(checkpoint)["kind"] == kind
    assert check_draft_file(checkpoint)["precision"] == PRECISION[kind]
    card = json.loads(checkpoint.with_suffix(".json").read_text())
    assert card["config"]["kind"] == kind and card["steps"] == 2 and card["target"] == str(world.target)
    assert card["precision"] == PRECISION[kind]
    served(run(world.train_argv(kind)))  # the same settings: resumed, already done
    assert training_log(TRAINED[kind]).step.tolist() == [1, 2]


def tune(world: World, kind: str, tmp_path: Path, capsys, monkeypatch) -> None:
    """`tune` on the kind's logbook, priced by a t(n) curve: the ranked settings and the engine's config text."""
    curve = tmp_path / "curve.json"
    curve.write_text(json.dumps({"sizes": [1, 64], "target_s": [0.01, 0.02], "draft_s": [0.001, 0.002]}))
    printed = served(run(["tune", "--engine", "sglang", "--logbook", str(world.logged(kind)[1]), "--cost-model",
                          str(curve), "--top", "2"]))
    assert f"sglang on {world.logged(kind)[1].name} ({len(PROMPTS)} prompts" in printed
    assert "--speculative-num-steps" in printed.split("the best setting as sglang takes it:")[1]


def try_(world: World, kind: str, tmp_path: Path, capsys, monkeypatch) -> None:
    """One prompt, HF generate beside one policy: τ, γ, the speedup (a mix draft's: not measured) and its output
    identical to HF's."""
    printed = served(run(["try", PROMPTS[0], "--pair", world.pair(kind), "--strategy", STRATEGIES[1],
                          "--max-new-tokens", str(NEW)]))
    assert "identical to HF generate: True" in printed and "τ = " in printed and "γ = " in printed, printed
    assert ("speedup vs HF generate: not measured" in printed) == is_mix(kind)


def strategies(world: World, kind: str, tmp_path: Path, capsys, monkeypatch) -> None:
    """No pair: the listing of every registered spec, whatever the kind (tests/cli/test_cli_help.py checks it)."""
    from spectree.strategies import REGISTRY

    forbid_loading(monkeypatch)
    printed = served(run(["strategies"]))
    assert all(f"\n  {name}" in printed for name in REGISTRY)


CHECKS = {"acceptance": acceptance, "bench": bench, "lossless": lossless, "log": log, "replay": replay,
          "strategies": strategies, "train": train, "try": try_, "tune": tune}


def test_every_command_is_checked():
    from spectree.cli import COMMANDS as CLI_COMMANDS

    assert set(CHECKS) == set(COMMANDS) == set(CLI_COMMANDS)


def test_every_command_runs_at_its_default_device_and_dtype(world):
    """The commands below are run without --device and --dtype (`train` and `replay` take neither)."""
    assert not {"--device", "--dtype"} & set(world.common)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_serves_or_refuses_every_draft_kind(command, kind, world, tmp_path, capsys, monkeypatch):
    CHECKS[command](world, kind, tmp_path, capsys, monkeypatch)


# --- flags that only some kinds can serve: refused before any model loads -----------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_hf_assisted_needs_a_standalone_draft(kind, world, tmp_path, capsys, monkeypatch):
    from spectree.speed.references import HF_ASSISTED

    pair, out = world.pair(kind), tmp_path / "bench.json"
    argv = ["bench", "--pair", pair, *world.common, "--strategies", "chain:k=2", "--hf-assisted", "--json", str(out)]
    if kind in STANDALONE:
        served(run(argv))
        rows = {r["strategy"]: r for r in json.loads(out.read_text())["rows"]}
        assert rows[HF_ASSISTED]["exact"] == 1.0
        return
    forbid_loading(monkeypatch)
    err = refuse(argv, capsys, world.home)
    assert f"--hf-assisted needs a standalone draft model (layerskip:, vdm: or hf:) as HF's assistant; pair {pair}" \
           in err and ("synthetic mix draft" if is_mix(kind) else "reads the target's hidden states") in err, err


@pytest.mark.parametrize("kind", KINDS)
def test_acceptance_card_needs_a_trained_draft(kind, world, capsys, monkeypatch):
    pair = world.pair(kind)
    argv = ["acceptance", "--pair", pair, *world.common, "--depth", "2", "--card"]
    if kind in TRAINED:
        card = world.home / "data" / "drafts" / f"{TRAINED[kind]}.json"
        assert "wrote the metrics into" in served(run(argv))
        assert json.loads(card.read_text())["metrics"]["held_out"].startswith(f"jsonl:{world.prompts}")
        return
    forbid_loading(monkeypatch)
    err = refuse(argv, capsys, world.home)
    assert f"has no trained draft card: a {KINDS[kind].partition(':')[0]} draft has none" in err, err


def test_tune_confirm_decodes_the_best_and_the_default_live_on_prompts_it_did_not_log(world, tmp_path, capsys,
                                                                                      monkeypatch):
    """`tune --confirm N`: after ranking, the best setting and the engine's default decoded live on N prompts the
    logbook did not log, measured beside projected (over our AR loop); refused in one line, before any load, where
    no such prompts are named or a file's cost model would be checked against this machine."""
    book, out = str(world.logged("hf")[1]), tmp_path / "tune.json"
    held = tmp_path / "held.jsonl"
    held.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in ["Name three rivers.", "Count to five.",
                                                                          "What is a prime number?"]))
    forbid_loading(monkeypatch)
    argv = ["tune", "--engine", "sglang", "--logbook", book, "--confirm", "2"]
    assert "the logbook's prompts come from jsonl:prompts, not a built-in set" in refuse(argv, capsys, world.home)
    assert "every prompt of jsonl:" in refuse([*argv, "--confirm-prompts", f"jsonl:{world.prompts}"], capsys,
                                              world.home)
    curve = tmp_path / "curve.json"
    curve.write_text(json.dumps({"sizes": [1, 64], "target_s": [0.01, 0.02], "draft_s": [0.001, 0.002]}))
    assert "leave out --cost-model" in refuse([*argv, "--confirm-prompts", f"jsonl:{held}", "--cost-model",
                                               str(curve)], capsys, world.home)
    monkeypatch.undo()
    printed = served(run([*argv, "--confirm-prompts", f"jsonl:{held}", "--positions", "6", "--json", str(out)]))
    assert "live on 2 held-out prompts, speedup over our AR loop on this machine:" in printed
    rows = json.loads(out.read_text())["confirm"]["rows"]
    assert [r["setting"] for r in rows][0] == "best" and len(rows) in (1, 2)
    for r in rows:  # the default's projection is NaN where this small logbook cannot replay it
        assert r["measured"] > 0 and r["projected_live"] > 0
        assert math.isfinite(r["projected"]) or r["setting"] != "best"
    assert json.loads(out.read_text())["confirm"]["prompts"] == ["jsonl:held/1", "jsonl:held/2"]  # `tune.spread`

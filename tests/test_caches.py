"""Internal caches are reused only when their manifest records what this run asks for; a cache made from another
value of ANY recorded key is rebuilt (with one note on stderr naming the key) and records the request again.
One case per cache kind: the cost model, the ShareGPT windows, the self-distilled answers, the trained C2T
classifier, the notebooks' logbooks, the notebook runner's stamp and the dequantised target."""
import json
from pathlib import Path

import pytest
from helpers import Chat, stand_in_draft, tiny_llama

from spectree.core.manifest import beside, inside


def counted(monkeypatch, module, name: str) -> list:
    """Replace module.name by a wrapper that records each call; returns the record."""
    real, calls = getattr(module, name), []

    def wrapper(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def costmodel(monkeypatch, home, target):
    from spectree.speed import costmodel as cm

    builds, draft = counted(monkeypatch, cm, "measure"), tiny_llama(seed=1, layers=1)

    def make():
        cm.load_or_measure("tiny", target, draft, sizes=(1, 2), prefix=8, repeats=1)
        return beside(cm.cache_path("tiny"))
    return make, builds


def sharegpt_windows(monkeypatch, home, target):
    from spectree.training import selfdistill

    talks = [{"conversations": [{"from": "human", "value": f"question {i} " * 3}, {"from": "gpt", "value": "answer"}]}
             for i in range(6)]
    monkeypatch.setattr(selfdistill, "load_sharegpt_conversations", lambda: (talks, 0))
    builds = counted(monkeypatch, selfdistill, "_tokenise_sharegpt")

    def make():
        assert len(selfdistill.sharegpt_chunks(Chat(), seq_len=8, seed=0, n_chunks=5)) == 5
        return beside(home / "data/cache/train/sharegpt-chunks-8-0-5.npy")
    return make, builds


def self_answers(monkeypatch, home, target):
    from spectree.training import selfdistill

    builds = counted(monkeypatch, selfdistill, "greedy_answers")

    def make():
        seqs = selfdistill.target_answers(target, Chat(), 2, max_new_tokens=3, seed=0, batch=2, shard=2,
                                          source="pystdlib")
        assert len(seqs) == 2
        return inside(home / "data/cache/train/self-answers-pystdlib-3-0-2")
    return make, builds


LOG = dict(max_new_tokens=4, K=3, d_max=2, beam=4, b_env=1, d_env=1)


def c2t_classifier(monkeypatch, home, target):
    from spectree.analysis import surfaces
    from spectree.replay.logbook import LogConfig, notebook_logbook
    from spectree.strategies.c2t import ClassifierTraining

    cfg = LogConfig(**LOG)
    notebook_logbook("mtbench:2", cfg, models=(target, tiny_llama(seed=1, layers=1), Chat()))
    builds = counted(monkeypatch, surfaces, "train_on_logbook")

    def make():
        _, origin = surfaces.get_classifier("missing", cfg, "mtbench:2", ClassifierTraining(epochs=1))
        return beside(home / "data/c2t" / f"{origin['classifier']}.safetensors")
    return make, builds


def notebook_logbook(monkeypatch, home, target):
    from spectree.replay import logbook as lb

    builds = counted(monkeypatch, lb, "log_prompt")  # one prompt: one call a build

    def make():
        return inside(lb.notebook_logbook("mtbench:1", lb.LogConfig(**LOG), (target, tiny_llama(1, 1), Chat())))
    return make, builds


def notebook_stamp(monkeypatch, home, target):
    import papermill

    from spectree.runs import runner

    (home / "notebooks").mkdir()
    cell = {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": ["n: int = 0  # a parameter\n"],
            "outputs": [], "execution_count": None}
    (home / "notebooks/nb.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                                         "nbformat_minor": 5}))
    builds = []

    def execute(source, executed, **kwargs):
        builds.append(1)
        Path(executed).write_text("{}")

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    monkeypatch.setattr(runner, "export_html", lambda executed, report: Path(report).write_text("<html>"))

    def make():
        runner.run_notebook("nb.ipynb", "quick", {"n": 1}, force=False)
        return home / "figures/nb/.inputs.json"
    return make, builds


def dequantised_target(monkeypatch, home, target):
    from tiny_gguf import write_tiny_llama_gguf

    from spectree.models import pairs
    from spectree.models.gguf import PackagedGGUF

    gguf = home / "gguf/tiny.gguf"
    gguf.parent.mkdir()
    write_tiny_llama_gguf(gguf)
    monkeypatch.setitem(pairs.TARGETS, "tiny", PackagedGGUF("none", "tiny.gguf"))
    monkeypatch.setattr(pairs, "packaged_gguf_path", lambda spec: gguf)
    builds = counted(monkeypatch, pairs, "load_gguf")

    def make():
        model, _ = pairs.load_target("tiny", device="cpu")
        assert model.config.vocab_size == 64
        return home / "data/cache/models/tiny/source.json"
    return make, builds


CASES = {  # cache kind → (builder, the keys its manifest records)
    "costmodel": (costmodel, ["machine", "pair", "prefix", "sizes", "timed_path"]),
    "sharegpt_windows": (sharegpt_windows, ["n_chunks", "seed", "seq_len", "tokenizer"]),
    "self_answers": (self_answers, ["batch", "max_new_tokens", "seed", "shard", "source", "target"]),
    "c2t_classifier": (c2t_classifier, ["logbook", "train_fraction", "training"]),
    "notebook_logbook": (notebook_logbook, ["K", "b_env", "beam", "d_env", "d_max", "draft", "format",
                                            "max_new_tokens", "pair", "prompts", "texts"]),
    "notebook_stamp": (notebook_stamp, ["drafts", "library", "notebook", "packages", "params", "profile"]),
    "dequantised_target": (dequantised_target, ["gguf", "mtime", "size"]),
}


def other(value):
    """A different value of the same JSON type (of null: a string, as a draft's digest)."""
    if value is None:
        return "other"
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "-other"
    if isinstance(value, list):
        return value + [0]
    return {**value, "other": 1}


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="module")
def target():
    return tiny_llama(seed=0, layers=3)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_recorded_key_is_tried_and_a_matching_cache_is_reused(case, home, target, monkeypatch):
    builder, keys = CASES[case]
    make, builds = builder(monkeypatch, home, target)
    manifest = make()
    assert sorted(json.loads(manifest.read_text())) == keys
    make()
    assert len(builds) == 1


@pytest.mark.parametrize("case, key", [(case, key) for case, (_, keys) in sorted(CASES.items()) for key in keys])
def test_a_cache_made_from_another_value_of_a_key_is_rebuilt(case, key, home, target, monkeypatch, capsys):
    builder, _ = CASES[case]
    make, builds = builder(monkeypatch, home, target)
    manifest = make()
    wanted = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**wanted, key: other(wanted[key])}))  # as if made from another value
    capsys.readouterr()
    assert make() == manifest and len(builds) == 2
    assert json.loads(manifest.read_text()) == wanted
    assert f": it was made with {key}=" in capsys.readouterr().err


def test_a_cache_without_a_manifest_is_rebuilt_and_a_half_built_one_is_never_reused(home, target, monkeypatch):
    make, builds = costmodel(monkeypatch, home, target)
    manifest = make()
    manifest.unlink()  # made before manifests: origin unknown
    make()
    assert len(builds) == 2 and manifest.exists()
    from spectree.speed import costmodel as cm

    def dies(*args, **kwargs):
        raise RuntimeError("killed half-way")

    monkeypatch.setattr(cm, "measure", dies)
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "sizes": [1]}))
    with pytest.raises(RuntimeError):
        make()
    assert not manifest.exists()  # the old record went first: the next run measures again


def test_self_answers_made_from_another_batch_are_regenerated_not_mixed(home, target, monkeypatch):
    from spectree.training import selfdistill

    folder = home / "data/cache/train/self-answers-pystdlib-3-0-2"
    first = selfdistill.target_answers(target, Chat(), 2, max_new_tokens=3, seed=0, batch=2, shard=2, source="pystdlib")
    (folder / "shard-00000.npz").write_bytes(b"answers of another recipe")
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "batch": 1}))
    assert selfdistill.target_answers(target, Chat(), 2, max_new_tokens=3, seed=0, batch=2, shard=2,
                                      source="pystdlib") == first


def test_a_notebook_logbook_of_a_retrained_draft_is_logged_again_while_log_name_refuses(home, target):
    from spectree.core.errors import SpectreeError
    from spectree.prompts import parse_prompt_spec
    from spectree.replay.logbook import LogConfig, notebook_logbook, read_logbook, write_logbook

    cfg, models = LogConfig(pair="smollm2-135m-instruct+vdm:nb", **LOG), (target, tiny_llama(1, 1), Chat())
    stand_in_draft(home, "nb")
    named = write_logbook(parse_prompt_spec("mtbench:1"), cfg, "named", models=models)
    shared = notebook_logbook("mtbench:1", cfg, models)
    first = json.loads(inside(shared).read_text())["draft"]
    stand_in_draft(home, "nb", value=2.0)  # the shipped draft, retrained
    with pytest.raises(SpectreeError, match="was made with draft="):
        write_logbook(parse_prompt_spec("mtbench:1"), cfg, "named", models=models)
    assert notebook_logbook("mtbench:1", cfg, models) == shared and len(read_logbook(shared)) == 1
    assert json.loads(inside(shared).read_text())["draft"] != first == json.loads(inside(named).read_text())["draft"]

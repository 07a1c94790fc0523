"""Named results resume only what they were made from: a training state (`train --name`) or a logbook (`log
--name`) asked for with any other setting is refused in one line before a model loads, and the old result stays
intact; Ctrl-C / SIGTERM during training keeps a checkpoint of the step reached, and any command ends in one line."""
import json
import signal
from dataclasses import asdict, replace

import pytest
import torch
from helpers import stand_in_draft, tiny_llama

from spectree import cli
from spectree.core.errors import SpectreeError
from spectree.core.interrupts import Interrupted
from spectree.training import training
from spectree.training.training import SAVE_EVERY_S, TrainConfig, run_record, train, training_log
from spectree.prompts import Prompt, parse_prompt_spec
from spectree.replay import logbook as lb
from spectree.replay.logbook import LogConfig, logbook_dir, logbook_manifest, write_logbook

TARGET = "smollm2-135m-instruct"
BASE = TrainConfig(kind="edd", steps=4, seq_len=16, batch=2, block_min=2, block_max=3, warmup=1, decay=2)
WINDOWS = torch.randint(3, 97, (64, 16), generator=torch.Generator().manual_seed(0)).tolist()
CHANGES = {"kind": "vdm", "loss": "ce", "hidden_layer": 1, "hidden_norm": True, "fuse": True, "block_min": 3,
           "block_max": 4, "root_weight": 2.0, "seq_len": 8, "batch": 1, "lr": 1e-3, "warmup": 2, "decay": 3,
           "steps": 5, "seed": 1, "data": "self", "self_prompts": 10, "self_code_prompts": 1, "self_max_new": 8,
           "self_batch": 4, "teacher_topk": 5, "target": "other-model"}


def shown(value) -> str:
    """A recorded value as the one-line refusal shows it."""
    return value if isinstance(value, str) else json.dumps(value)


def snapshot(folder) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def target():
    return tiny_llama(seed=0, layers=3)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    monkeypatch.setattr(training, "training_windows", lambda target, tok, cfg: WINDOWS[:cfg.steps * cfg.batch])
    return tmp_path


@pytest.fixture
def no_model(monkeypatch):
    import spectree.models.pairs as pairs

    def fail(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(pairs, "load_target", fail)
    monkeypatch.setattr("spectree.models.loading.load_pair", fail)


def train_argv(cfg: TrainConfig, *extra: str) -> list[str]:
    argv = ["train", "--name", "x"]
    for key, value in asdict(cfg).items():
        argv += [f"--{key.replace('_', '-')}", ("yes" if value else "no") if isinstance(value, bool) else str(value)]
    return argv + list(extra)


def hook_loss(monkeypatch, before_step):
    """Run `before_step(k)` as training computes the loss of its k-th step (1-based) of this call."""
    real, calls = training.loss_fn, []

    def hooked(*args, **kwargs):
        calls.append(1)
        before_step(len(calls))
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "loss_fn", hooked)


# --- training ------------------------------------------------------------------------------------------------

def test_every_recorded_training_key_is_tried():
    assert set(run_record(BASE, TARGET)) == set(CHANGES)


@pytest.mark.parametrize("key", sorted(CHANGES))
def test_resuming_training_with_another_setting_is_refused_before_the_target_loads(key, home, target, no_model,
                                                                                   capsys):
    work = train("x", BASE, target, None, target_name=TARGET)
    before = snapshot(work)
    capsys.readouterr()
    changed = ["--target", CHANGES[key]] if key == "target" else []
    cfg = BASE if key == "target" else replace(BASE, **{key: CHANGES[key]})
    assert cli.main(train_argv(cfg, *changed)) == 2
    old = TARGET if key == "target" else getattr(BASE, key)
    assert capsys.readouterr().err == (f"spectree: error: data/cache/train/x was made with {key}={shown(old)}; "
                                       f"this run asks {key}={shown(CHANGES[key])}: pass --restart to start over, "
                                       "or another --name\n")
    assert snapshot(work) == before
    with pytest.raises(SpectreeError, match=f"was made with {key}="):  # the library refuses the same way
        train("x", cfg, target, None, target_name=CHANGES[key] if key == "target" else TARGET)
    assert snapshot(work) == before


def test_restart_trains_the_new_settings_from_step_zero(home, target, monkeypatch):
    train("x", BASE, target, None, target_name=TARGET)
    monkeypatch.setattr("spectree.models.pairs.load_target", lambda name: (target, None))
    assert cli.main(train_argv(replace(BASE, lr=1e-3), "--restart")) == 0
    assert training_log("x").step.tolist() == [1, 2, 3, 4]
    assert json.loads((home / "data/cache/train/x/manifest.json").read_text())["lr"] == 1e-3


def test_same_settings_resume_and_without_decay_a_run_may_be_extended(home, target):
    no_decay = replace(BASE, decay=0)
    train("straight", no_decay, target, None)
    train("grown", replace(no_decay, steps=2), target, None)
    train("grown", no_decay, target, None)  # the first two steps are those of the 4-step run
    assert training_log("grown").loss.tolist() == pytest.approx(training_log("straight").loss.tolist(), rel=1e-4)
    train("grown", no_decay, target, None)  # done: nothing to do, nothing refused
    assert training_log("grown").step.max() == 4


def test_a_state_from_before_manifests_is_checked_against_its_config(home, target):
    work = train("x", BASE, target, None)
    (work / "manifest.json").unlink()
    (work / "config.json").write_text(json.dumps({k: v for k, v in asdict(BASE).items() if k != "fuse"}))
    with pytest.raises(SpectreeError, match=r"was made with lr=0.0003; this run asks lr=0.001"):
        train("x", replace(BASE, lr=1e-3), target, None)
    train("x", BASE, target, None)  # the same settings (fuse at its default) adopt the state
    assert json.loads((work / "manifest.json").read_text()) == json.loads(json.dumps(run_record(BASE, "")))
    (work / "manifest.json").unlink()
    (work / "config.json").unlink()
    with pytest.raises(SpectreeError, match="holds results of unrecorded settings: pass --restart"):
        train("x", BASE, target, None)


# --- interruption --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_saves_the_step_reached_and_the_run_resumes_exactly(signum, home, target, monkeypatch):
    train("straight", BASE, target, None)
    armed = [True]
    hook_loss(monkeypatch, lambda k: signal.raise_signal(signum) if armed[0] and k == 2 else None)
    with pytest.raises(Interrupted) as stopped:
        train("cut", BASE, target, None, save_every_s=1e9)  # no timed checkpoint: the signal's one only
    assert stopped.value.signum == signum
    work = home / "data/cache/train/cut"
    assert torch.load(work / "state.pt", weights_only=True)["step"] == 2
    assert sorted(snapshot(work)) == ["manifest.json", "state.pt", "vocab.npy"]  # no temp file left
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored
    armed[0] = False
    train("cut", BASE, target, None)
    assert training_log("cut").loss.tolist() == pytest.approx(training_log("straight").loss.tolist(), rel=1e-4)


@pytest.mark.parametrize("every, saved", [(0, [None, 1, 2, 3]), (1e9, [None, None, None, None])])
def test_save_every_sets_the_checkpoint_interval(every, saved, home, target, monkeypatch, capsys):
    state, seen = home / "data/cache/train/x/state.pt", []
    hook_loss(monkeypatch, lambda k: seen.append(torch.load(state, weights_only=True)["step"] if state.exists()
                                                 else None))
    monkeypatch.setattr("spectree.models.pairs.load_target", lambda name: (target, None))
    assert cli.main(train_argv(BASE, "--save-every", str(every))) == 0
    assert seen == saved
    assert cli.build_parser().parse_args(["train", "--name", "x"]).save_every == SAVE_EVERY_S == 180


def test_sigterm_in_train_command_exits_143_in_one_line_with_a_checkpoint(home, target, monkeypatch, capsys):
    monkeypatch.setattr("spectree.models.pairs.load_target", lambda name: (target, None))
    hook_loss(monkeypatch, lambda k: signal.raise_signal(signal.SIGTERM) if k == 3 else None)
    assert cli.main(train_argv(BASE)) == 128 + signal.SIGTERM
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "spectree: interrupted" and "Traceback" not in err
    assert torch.load(home / "data/cache/train/x/state.pt", weights_only=True)["step"] == 3


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_ctrl_c_in_any_command_prints_one_line_and_exits_130(command, monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, command, interrupted)
    argv = {"replay": ["replay", "somewhere"], "train": ["train", "--name", "x"],
            "tune": ["tune", "--engine", "sglang"], "try": ["try", "hello"]}.get(command, [command])
    assert cli.main(argv) == 130
    assert capsys.readouterr().err == "spectree: interrupted\n"


# --- logbooks ------------------------------------------------------------------------------------------------

class Chat:
    """A chat template of a few ids taken from the message."""

    eos_token_id = 2

    def apply_chat_template(self, messages, add_generation_prompt=True):
        return [3 + ord(c) % 90 for c in messages[0]["content"][:6]]


PROMPTS = [Prompt("mtbench", "81", "writing", "alpha"), Prompt("mtbench", "82", "math", "beta")]
LOG = LogConfig(pair=f"{TARGET}+vdm:tiny", max_new_tokens=3, K=3, d_max=2, beam=4, b_env=1, d_env=1)


@pytest.fixture
def logged(home, target):
    """A logbook of PROMPTS under LOG in home/lb (the draft checkpoint is a stand-in file: only its bytes count)."""
    for name in ("tiny", "tiny2"):
        stand_in_draft(home, name)
    return write_logbook(PROMPTS, LOG, "z", out=home / "lb", models=(target, tiny_llama(seed=1, layers=1), Chat()))


LOG_CHANGES = {  # recorded key → (prompts, config) of a request that differs in that key only
    **{key: (PROMPTS, replace(LOG, **{key: value})) for key, value in
       {"pair": f"{TARGET}+vdm:tiny2", "max_new_tokens": 4, "K": 4, "d_max": 3, "beam": 5, "b_env": 2,
        "d_env": 2}.items()},
    "prompts": ([replace(PROMPTS[0], id="83"), PROMPTS[1]], LOG), "format": (PROMPTS, LOG), "draft": (PROMPTS, LOG),
    "texts": ([replace(PROMPTS[0], text="gamma"), PROMPTS[1]], LOG),
}


def test_every_recorded_logbook_key_is_tried(logged):
    assert set(json.loads((logged / "manifest.json").read_text())) == set(LOG_CHANGES)


@pytest.mark.parametrize("key", sorted(LOG_CHANGES))
def test_logging_another_request_under_a_logbook_name_is_refused_before_a_model_loads(key, logged, home, no_model,
                                                                                      monkeypatch):
    before = snapshot(logged)
    prompts, cfg = LOG_CHANGES[key]
    if key == "format":
        monkeypatch.setattr(lb, "LOG_FORMAT", lb.LOG_FORMAT + 1)
    if key == "draft":
        stand_in_draft(home, "tiny", value=2.0)
    old = json.loads((logged / "manifest.json").read_text())[key]
    new = logbook_manifest(prompts, cfg)[key]
    with pytest.raises(SpectreeError) as refused:
        write_logbook(prompts, cfg, "z", out=logged)
    assert str(refused.value) == (f"lb was made with {key}={shown(old)}; this run asks {key}={shown(new)}: "
                                  "pass another --name, or delete it to log again")
    assert snapshot(logged) == before


def test_log_command_with_other_prompts_under_a_name_exits_2_in_one_line(home, target, no_model, capsys):
    stand_in_draft(home, "tiny")
    models = (target, tiny_llama(seed=1, layers=1), Chat())
    folder = write_logbook(parse_prompt_spec("mtbench:1"), LOG, "Z", models=models)
    assert folder == logbook_dir(LOG, "Z")
    before = snapshot(folder)
    capsys.readouterr()
    argv = ["log", "--name", "Z", "--prompts", "mtbench:2", "--pair", LOG.pair, "--max-new-tokens", "3", "--K", "3",
            "--d-max", "2", "--beam", "4", "--b-env", "1", "--d-env", "1"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"spectree: error: data/cache/logbooks/{folder.name} was made with prompts=[\"mtbench/")
    assert "; this run asks prompts=" in err and err.endswith(": pass another --name, or delete it to log again\n")
    assert len(err.splitlines()) == 1 and snapshot(folder) == before


def test_an_interrupted_logbook_keeps_only_whole_files_and_resumes(home, target, monkeypatch):
    real, calls = lb.log_prompt, []

    def second_is_interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(lb, "log_prompt", second_is_interrupted)
    models = (target, tiny_llama(seed=1, layers=1), Chat())
    cfg = replace(LOG, pair="smollm2-layerskip")
    with pytest.raises(KeyboardInterrupt):
        write_logbook(PROMPTS, cfg, "z", out=home / "lb", models=models)
    first = snapshot(home / "lb")
    assert sorted(first) == ["0000.parquet", "config.json", "manifest.json"]
    write_logbook(PROMPTS, cfg, "z", out=home / "lb", models=models)
    done = snapshot(home / "lb")
    assert sorted(done) == ["0000.parquet", "0001.parquet", "config.json", "manifest.json"]
    assert done["0000.parquet"] == first["0000.parquet"]


def test_a_logbook_from_before_manifests_is_adopted_only_for_its_own_request(logged, no_model):
    (logged / "manifest.json").unlink()
    with pytest.raises(SpectreeError, match="was made with prompts="):
        write_logbook([PROMPTS[1], PROMPTS[0]], LOG, "z", out=logged)
    assert not (logged / "manifest.json").exists()
    write_logbook(PROMPTS, LOG, "z", out=logged)  # everything logged: no model needed
    assert json.loads((logged / "manifest.json").read_text()) == logbook_manifest(PROMPTS, LOG)


def test_a_record_nothing_was_logged_from_is_replaced(home, target, monkeypatch):
    def stopped_while_loading(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("spectree.models.loading.load_pair", stopped_while_loading)
    cfg = replace(LOG, pair="smollm2-layerskip")
    with pytest.raises(KeyboardInterrupt):  # stopped while loading: a manifest, no logged prompt
        write_logbook(PROMPTS, cfg, "z", out=home / "lb")
    write_logbook(PROMPTS[:1], cfg, "z", out=home / "lb", models=(target, tiny_llama(seed=1, layers=1), Chat()))
    assert json.loads((home / "lb/manifest.json").read_text())["prompts"] == ["mtbench/81"]

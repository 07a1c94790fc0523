"""The one manifest mechanism every cache uses (refuse a named result made otherwise, rebuild an internal one) and
the deferred signals that let training checkpoint before it stops."""
import json
import signal
import threading

import pytest

from spectree.core.errors import SpectreeError
from spectree.core.interrupts import Deferred, Interrupted
from spectree.core.manifest import (
    beside,
    check_manifest,
    inside,
    matches,
    resume_or_refuse,
    resume_or_restart,
    reuse_or_rebuild,
    write_manifest,
)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    return tmp_path


def test_a_differing_record_is_refused_in_one_line_naming_each_key_old_and_new(home):
    write_manifest(inside(home / "run"), {"lr": 0.001, "seed": 0, "kind": "edd", "sizes": (1, 2)})
    assert check_manifest(inside(home / "run"), {"lr": 0.001, "seed": 0, "kind": "edd", "sizes": [1, 2]}, "fix it")
    with pytest.raises(SpectreeError) as refused:
        check_manifest(inside(home / "run"), {"lr": 0.002, "seed": 1, "kind": "edd", "sizes": [1, 2]}, "fix it")
    assert str(refused.value) == "run was made with lr=0.001, seed=0; this run asks lr=0.002, seed=1: fix it"
    assert not check_manifest(inside(home / "new"), {"lr": 1}, "fix it")  # nothing recorded: a new artifact


def test_long_values_are_shown_short_and_missing_keys_say_so(home):
    keys = [f"mtbench/{i}" for i in range(40)]
    write_manifest(beside(home / "a.npy"), {"prompts": keys})
    with pytest.raises(SpectreeError) as refused:
        check_manifest(beside(home / "a.npy"), {"prompts": keys[1:], "extra": 1}, "fix")
    text = str(refused.value)
    assert text.startswith("a.npy was made with extra=(not recorded), prompts=[40: mtbench/0, mtbench/1, … #")
    assert "this run asks extra=1, prompts=[39: mtbench/1, mtbench/2, … #" in text and "\n" not in text


def test_an_unreadable_manifest_is_refused_for_a_named_result_and_rebuilt_for_a_cache(home):
    (home / "run").mkdir()
    inside(home / "run").write_text("{half")
    with pytest.raises(SpectreeError, match="manifest.json is unreadable .*: fix it"):
        check_manifest(inside(home / "run"), {"a": 1}, "fix it")
    assert not matches(inside(home / "run"), {"a": 1})
    assert reuse_or_rebuild(inside(home / "run"), {"a": 1}, lambda: "old", lambda: "new") == "new"
    assert reuse_or_rebuild(inside(home / "run"), {"a": 1}, lambda: "old", lambda: "new") == "old"


def test_reuse_or_rebuild_records_only_after_a_build_succeeds(home):
    path = beside(home / "cost.json")
    reuse_or_rebuild(path, {"a": 1}, lambda: "old", lambda: "made")

    def dies():
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        reuse_or_rebuild(path, {"a": 2}, lambda: "old", dies)
    assert not path.exists()  # the a=1 record is gone with the a=1 artifact it described
    assert reuse_or_rebuild(path, {"a": 1}, lambda: "old", lambda: "made again") == "made again"
    assert reuse_or_rebuild(path, {"a": 1}, lambda: None, lambda: "unusable: made again") == "unusable: made again"


def test_resume_or_restart_clears_the_steps_of_another_record(home, capsys):
    folder, cleared = home / "shards", []
    assert not resume_or_restart(inside(folder), {"batch": 2}, lambda: cleared.append(1))
    assert resume_or_restart(inside(folder), {"batch": 2}, lambda: cleared.append(1)) and cleared == [1]
    assert not resume_or_restart(inside(folder), {"batch": 4}, lambda: cleared.append(1)) and cleared == [1, 1]
    assert "rebuilding shards: it was made with batch=2; this run asks batch=4" in capsys.readouterr().err
    assert json.loads(inside(folder).read_text()) == {"batch": 4}
    assert resume_or_restart(inside(home / "old"), {"b": 1}, lambda: cleared.append(1), legacy={"b": 1})
    assert cleared == [1, 1] and matches(inside(home / "old"), {"b": 1})  # adopted


def test_resume_or_refuse_replaces_a_record_nothing_was_made_from_and_refuses_steps_of_unknown_origin(home):
    folder = home / "named"
    resume_or_refuse(folder, {"a": 1}, made=False, fix="rename")
    resume_or_refuse(folder, {"a": 2}, made=False, fix="rename")  # nothing made from a=1 yet
    resume_or_refuse(folder, {"a": 2}, made=True, fix="rename")
    with pytest.raises(SpectreeError, match="named was made with a=2; this run asks a=3: rename"):
        resume_or_refuse(folder, {"a": 3}, made=True, fix="rename")
    with pytest.raises(SpectreeError, match="unknown holds results of unrecorded settings: rename"):
        resume_or_refuse(home / "unknown", {"a": 3}, made=True, fix="rename")


def test_deferred_signals_wait_for_check_and_a_second_one_interrupts_at_once():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with Deferred() as stop:
        signal.raise_signal(signal.SIGTERM)
        assert stop.signum == signal.SIGTERM  # noted, not raised
        with pytest.raises(Interrupted) as second:
            signal.raise_signal(signal.SIGINT)
        assert second.value.signum == signal.SIGINT
        with pytest.raises(Interrupted):
            stop.check()
    assert {s: signal.getsignal(s) for s in before} == before  # handlers restored


def test_deferred_does_nothing_outside_the_main_thread():
    seen = []

    def run():
        with Deferred() as stop:
            seen.append(stop.signum)
            stop.check()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert seen == [None]

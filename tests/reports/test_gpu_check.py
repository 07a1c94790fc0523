"""The GPU checklist's summary (`reports.gpu_check`) and its section of RESULTS.md: lossless JSON files in the CLI's
format become claims whose verdict follows the mismatches (near-ties pass, any other mismatch fails); without a
recorded checklist RESULTS.md says plainly that the GPU path is untested."""
import json

import pytest

from spectree.core.errors import SpectreeError
from spectree.reports import gpu_check, results

RUN = {"profile": "default", "commit": "abc1234", "date": "2000-01-01 00:00 UTC", "device": "CPU, 2 threads"}


def lossless_result(checked: int, ties: int, bugs: int) -> dict:
    """What `python -m spectree lossless --json` writes (cli.cmd_lossless): config, checked, mismatches, rows."""
    mismatch = {"prompt": "mtbench:81", "strategy": "chain:k=2", "position": 7, "ref_len": 64, "out_len": 64}
    return {"config": {"pair": "smollm2-edd", "dtype": "bfloat16"}, "checked": checked,
            "mismatches": [{**mismatch, "top2_gap": 1e-3, "tie": True}] * ties
            + [{**mismatch, "top2_gap": 2.5, "tie": False}] * bugs, "rows": []}


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    return tmp_path


def test_lossless_claims_follow_the_mismatches(home):
    folder = home / "figures" / gpu_check.STEM
    folder.mkdir(parents=True)
    (folder / "lossless-bfloat16.json").write_text(json.dumps(lossless_result(40, ties=2, bugs=0)))
    (folder / "lossless-float32.json").write_text(json.dumps(lossless_result(40, ties=0, bugs=1)))
    (folder / "bench.json").write_text(json.dumps({"rows": [
        {"strategy": "hf-generate", "speedup": 1.0, "tau": 1.0, "tokens_per_s": 30.0},
        {"strategy": "chain:k=2", "speedup": 1.4, "tau": 1.8, "tokens_per_s": 42.0},
        {"strategy": "eagle2:K=8,N=32", "speedup": 2.1, "tau": 3.2, "tokens_per_s": 63.0}]}))
    summary = gpu_check.summarize(folder)
    verdicts = {c["name"]: c["verdict"] for c in summary["claims"]}
    assert verdicts == {"greedy speculative decoding is lossless on the GPU (bfloat16)": "holds",
                        "greedy speculative decoding is lossless on the GPU (float32)": "does not hold"}
    assert summary["best strategy"] == "eagle2:K=8,N=32" and summary["pair"] == "smollm2-edd"
    assert json.loads((folder / "summary.json").read_text())["claims"][0]["n"] == 40
    results.record_run(gpu_check.STEM, {**RUN, "device": "NVIDIA H100"}, 0.0)
    text = results.render([], RUN)
    assert "## GPU checklist" in text and "NVIDIA H100" in text and gpu_check.UNTESTED not in text
    assert "lossless on the GPU (float32) | lossless | 39/40 identical, 1 not a near-tie | **does not hold**" in text


def test_results_say_the_gpu_path_is_untested_without_a_checklist(home):
    assert gpu_check.UNTESTED in results.render([], RUN)


def test_no_lossless_files_is_one_clear_error(home):
    with pytest.raises(SpectreeError, match="no lossless-<dtype>.json .* run scripts/gpu_check.sh"):
        gpu_check.summarize(home)

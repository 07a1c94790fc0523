"""The bf16 control (`speed.divergence`): first divergences are found where two generations part; our decoder's
cached path reads HF's own logits (float32: equal; bfloat16: within the noise between HF's own two attention
backends); the control's floor decides which divergences are rounding; the GPU summary's claims follow it."""
import json

import pytest
import torch

from spectree.models.random_pairs import random_pair
from spectree.gpu import gpu_summary
from spectree.speed import divergence


def test_first_divergence_names_where_two_generations_part():
    assert divergence.first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert divergence.first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert divergence.first_divergence([1, 2], [1, 2, 3]) == 2  # a length difference parts at the shorter's end


def test_the_control_floor_decides_which_divergences_are_rounding():
    assert divergence.within_control(3.0, 2.0) and divergence.within_control(4.0, 2.0)
    assert not divergence.within_control(4.5, 2.0)
    assert not divergence.within_control(None, 2.0)  # a length-only difference is no rounding
    rows = [{"path": "HF eager", "max_abs": 1.5}, {"path": "HF eager", "max_abs": 3.0}, {"path": "our AR", "max_abs": 9}]
    assert divergence.control_floor(rows) == 3.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_our_cached_path_reads_hf_logits_within_the_controls_noise(dtype):
    target, _, tok = random_pair("tiny", dtype=dtype)
    ids, ref = list(range(3, 40)), list(range(50, 62))
    with divergence.attention(target, "sdpa"):
        sdpa = divergence.teacher_forced(target, ids, ref)
    with divergence.attention(target, "eager"):
        eager = divergence.teacher_forced(target, ids, ref)
    assert target.config._attn_implementation == "sdpa"  # restored
    for chunk in (1, 4):
        ours = divergence.cached(target, ids, ref, chunk)
        assert ours.shape == sdpa.shape == (len(ref), target.config.vocab_size)
        if dtype == torch.float32:
            assert torch.allclose(ours, sdpa, atol=1e-4)
        else:  # no farther from HF SDPA than HF's eager backend is, give or take a bf16 ulp of the largest logit
            ulp = 2.0 ** (torch.log2(sdpa.abs().max()).floor() - 7)
            assert divergence.noise(sdpa, ours)["max_abs"] <= divergence.noise(sdpa, eager)["max_abs"] + ulp


def test_the_characterisation_and_the_summary_claims_on_a_tiny_pair(tmp_path):
    result = divergence.run("tiny", "bfloat16", "cpu", 2, 24, 6)  # 2 prompts × 4 compared decodes: 8 units
    pairs = {r["pair"] for r in result["rows"]}
    assert pairs == {p for p, _, _ in divergence.PAIRS} and result["floor"] > 0
    assert set(divergence.table(result)["pair"]) == pairs
    measured = gpu_summary.controls({"shapes": {"tiny": result}}, "cpu")
    assert "tiny on cpu" in measured
    assert gpu_summary.control_claim(measured)["verdict"] in ("holds", "does not hold")
    bad = json.loads(json.dumps(measured))
    row = next(r for r in bad["tiny on cpu"]["rows"] if r["pair"] == "our AR vs HF sdpa")
    row.update(first_divergence=3, top2_gap=2 * result["floor"] + 1.0, top1=10.0)
    claim = gpu_summary.control_claim(bad)
    assert claim["verdict"] == "does not hold" and "our AR vs HF sdpa at 3 (tiny on cpu" in claim["ours"]
    # the checklist's summary reads the CPU controls from its folder's sibling bf16_control/ (`gpu.bf16_control`)
    (tmp_path / "gpu_check").mkdir()
    (tmp_path / "gpu_check" / "lossless.json").write_text(json.dumps({"shape": "tiny", "dtypes": {}}))
    assert not any("control" in c["name"] for c in gpu_summary.summarize(tmp_path / "gpu_check")["claims"])
    (tmp_path / gpu_summary.CPU_CONTROL).mkdir()
    (tmp_path / gpu_summary.CPU_CONTROL / "tiny-bfloat16-cpu.json").write_text(json.dumps(result))
    summary = gpu_summary.summarize(tmp_path / "gpu_check")
    assert "bf16 control floor, tiny on cpu (2 prompts, 24 + 6 tokens)" in summary
    assert "bf16 first divergences, tiny on cpu (2 prompts, 24 + 6 tokens)" in summary["tables"]


def test_a_bf16_mismatch_within_the_controls_floor_is_rounding():
    mismatch = {"prompt": "p", "strategy": "AR (our loop)", "position": 7, "ref_len": 24, "out_len": 24,
                "top2_gap": 30.0, "top1": 472.0, "tie": False}
    result = {"checked": 8, "rows": [], "skipped": {}, "mismatches": [mismatch]}  # 8 decodes: enough units
    assert gpu_summary.lossless_claim(result, "bfloat16", floors={"8b": 188.0}, shape="8b")["verdict"] == "holds"
    assert gpu_summary.lossless_claim(result, "bfloat16", floors={"8b": 10.0}, shape="8b")["verdict"] == "does not hold"
    assert gpu_summary.lossless_claim(result, "float32", floors={"8b": 188.0}, shape="8b")["verdict"] == \
        "does not hold"  # the control is bf16's: float32 keeps its own near-tie rule

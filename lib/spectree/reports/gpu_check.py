"""The GPU checklist's summary. `scripts/gpu_check.sh` runs, on a CUDA machine, `lossless` in bfloat16 and in float32
and the `bench` speed table for one pair, each writing its JSON into figures/gpu_check/; `summarize` turns those
files into figures/gpu_check/summary.json (the notebooks' format: headline numbers and claims with verdicts and the
stamp of the run), which RESULTS.md renders after the notebooks — or says that the GPU path is untested.

    python -m spectree.reports.gpu_check figures/gpu_check
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from spectree.analysis.claims import FAILS, HOLDS, Evidence, claim, jsonable
from spectree.core.errors import SpectreeError
from spectree.core.manifest import read_json_object
from spectree.core.paths import atomic_write_text, figures_dir

STEM = "gpu_check"  # figures/gpu_check/: the checklist's JSON files and its summary.json
UNTESTED = ("The GPU path is untested: no run of `scripts/gpu_check.sh` on a CUDA machine is recorded here "
            "(figures/gpu_check/summary.json).")


def _read(path: Path) -> dict[str, Any]:
    return read_json_object(path, "a JSON result", "; rerun scripts/gpu_check.sh")


def lossless_claim(result: dict[str, Any], dtype: str) -> dict[str, Any]:
    """`lossless --json`'s result → the claim "greedy decoding is lossless" in `dtype`: it holds when no
    generation differs from HF generate except at a near-tie (the AR top-2 logit gap under the dtype's
    threshold, `speed.bench.TIE_GAP`), and does not hold at the first other mismatch. A deterministic count, n = generations."""
    checked = int(result["checked"])
    bugs = [m for m in result["mismatches"] if not m["tie"]]
    rule = (f"every generation equals HF generate, lengths included; a mismatch passes only at a near-tie of "
            f"{dtype}'s logit noise")
    evidence = Evidence(HOLDS if checked and not bugs else FAILS, rule, checked)
    ours = f"{checked - len(result['mismatches'])}/{checked} identical, {len(bugs)} not a near-tie"
    return claim(f"greedy speculative decoding is lossless on the GPU ({dtype})", "lossless", ours, evidence)


def summarize(folder: Path) -> dict[str, Any]:
    """summary.json of the checklist's files in `folder` (lossless-<dtype>.json, bench.json); written atomically."""
    lossless = sorted(folder.glob("lossless-*.json"))
    if not lossless:
        raise SpectreeError(f"no lossless-<dtype>.json in {folder}: run scripts/gpu_check.sh on a CUDA machine")
    summary: dict[str, Any] = {}
    claims = []
    for path in lossless:
        result = _read(path)
        dtype = path.stem.split("-", 1)[1]
        summary.setdefault("pair", result.get("config", {}).get("pair"))
        claims.append(lossless_claim(result, dtype))
        summary[f"lossless {dtype}"] = claims[-1]["ours"]
    bench = folder / "bench.json"
    if bench.exists():
        rows = [r for r in _read(bench)["rows"] if not str(r["strategy"]).startswith("hf-")]
        best = max(rows, key=lambda r: r["speedup"], default=None)
        if best is not None:
            summary.update({"best strategy": best["strategy"], "its speedup over HF generate": best["speedup"],
                            "its τ": best["tau"], "tokens/s": best["tokens_per_s"]})
    summary["claims"] = claims
    atomic_write_text(folder / "summary.json", json.dumps(jsonable(summary), indent=1) + "\n")
    return summary


def main(argv: list[str]) -> int:
    from spectree.reports.results import record_run, stamp

    folder = Path(argv[0]) if argv else figures_dir() / STEM
    summary = summarize(folder)
    if folder.resolve() == (figures_dir() / STEM).resolve():
        record_run(STEM, stamp("gpu_check"), 0.0)  # the device, commit and date RESULTS.md shows
    print(json.dumps(jsonable(summary), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

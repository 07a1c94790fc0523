"""The GPU checklist's summary (`gpu.gpu_check` writes the files, this reads them): summary.json's headline
numbers, claims and tables, which RESULTS.md's GPU section renders (`results.gpu_section`).

The lossless claims read every mismatch with the rounding rule of its dtype: a fixed near-tie threshold
(`speed.bench.tie_gap`), and in bf16 also the control measured on the same machine (`speed.divergence`): a mismatch
whose top-2 gap is within twice the noise floor between HF's own SDPA and eager backends at its shape is rounding.
Every claim here is a bar of ours (kind "bar": lossless checks, the bf16 control, tree construction's share), counted
apart from the papers' claims, and none decides on fewer than `claims.MIN_UNITS` independent units: generations
checked (a setting on a prompt, each its own exact comparison) for the lossless and control claims; for the share,
the prompts its one timing run decoded (`env.json`'s plan), since shares are pooled over them.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from spectree.core.errors import SpectreeError
from spectree.core.paths import atomic_write_text

CPU_CONTROL = "bf16_control"  # figures/bf16_control/: the control measured on the CPU (`gpu.bf16_control`)
TREE_SHARE_BAR = 0.10  # issue 37: move what dominates where tree construction passes this share of a step


def _read(path: Path) -> dict[str, Any]:
    from spectree.core.manifest import read_json_object

    return read_json_object(path, "a GPU checklist result", "; rerun scripts/gpu_check.sh")


def _named(m: dict[str, Any]) -> str:
    top1 = m.get("top1")
    of = f" of a top-1 logit {top1:.3g}" if top1 is not None and top1 == top1 else ""  # NaN: not recorded
    return f"{m['strategy']} on {m['prompt']}{m.get('where', '')} at {m['position']} (gap {m['top2_gap']:.2g}{of})"


def control_floors(control: Optional[dict[str, Any]]) -> dict[str, float]:
    """shape → the control's noise floor (`speed.divergence.control_floor`) from control.json ({} without one)."""
    if not control:
        return {}
    return {shape: float(r["floor"]) for shape, r in control.get("shapes", {}).items() if "floor" in r}


def _rounding(m: dict[str, Any], floor: Optional[float]) -> bool:
    """A mismatch rounding explains: a near-tie of its dtype, or (bf16, with a control) within the control's floor."""
    from spectree.speed.divergence import within_control

    return bool(m["tie"]) or (floor is not None and within_control(m.get("top2_gap"), floor))


def lossless_claim(result: dict[str, Any], dtype: str, large: Optional[dict[str, Any]] = None,
                   floors: Optional[dict[str, float]] = None, shape: str = "", label: str = "") -> dict[str, Any]:
    """One dtype's lossless result (and the large shape's, `large_step`) → the claim "greedy decoding is
    lossless": it holds when no generation differs from HF generate except where rounding explains it (a near-tie
    of the dtype, or in bf16 within twice the control's noise floor at that shape: `floors`), does not hold at the
    first other mismatch, and is inconclusive while a setting was skipped. A deterministic count, n = generations
    checked; every mismatch is named. `label`: the path's name in the claim (e.g. "through CUDA graphs")."""
    from spectree.claims.claims import LOSSLESS, Evidence, claim
    from spectree.claims.verdicts import BAR, FAILS, HOLDS, INCONCLUSIVE

    floors = (floors or {}) if dtype == "bfloat16" else {}  # the control is bf16's
    checked = int(result["checked"])
    mismatches = [{**m, "shape": shape} for m in result["mismatches"]]
    if large is not None and dtype in large["dtypes"]:
        checked += int(large["dtypes"][dtype]["checked"])
        mismatches += [{**m, "where": f" ({large['shape']})", "shape": large["shape"]}
                       for m in large["dtypes"][dtype]["mismatches"]]
    ties = [m for m in mismatches if _rounding(m, floors.get(m["shape"]))]
    bugs = [m for m in mismatches if not _rounding(m, floors.get(m["shape"]))]
    rule = (f"every generation equals HF generate, lengths included; a mismatch passes only at a near-tie of "
            f"{dtype}'s logit noise" + (" or within twice the control's noise floor (HF SDPA vs HF eager) at its "
                                         "shape" if floors else ""))

    def names(ms: list) -> str:
        return "; ".join(map(_named, ms[:5])) + ("; …" if len(ms) > 5 else "")

    ours = (f"{checked - len(mismatches)}/{checked} identical, {len(bugs)} not rounding"
            + (f"; not rounding: {names(bugs)}" if bugs else "") + (f"; rounding: {names(ties)}" if ties else ""))
    verdict = FAILS if bugs else INCONCLUSIVE if not checked or result.get("skipped") else HOLDS
    evidence = Evidence(verdict, rule + ", every setting run", checked)
    return claim(f"greedy speculative decoding is lossless on the GPU ({dtype}{label})", LOSSLESS, ours, evidence,
                 goal="every output equals HF generate's", kind=BAR)


def controls(control: Optional[dict[str, Any]], device: str, cpu: Optional[Path] = None) -> dict[str, dict[str, Any]]:
    """Every bf16 control measured, labelled "SHAPE on DEVICE": the checklist's (control.json, per shape) and the
    CPU's, from the folder `cpu` (the checklist folder's sibling figures/bf16_control/, `gpu.bf16_control`)."""
    out = {f"{shape} on {device}": r for shape, r in (control or {}).get("shapes", {}).items() if "rows" in r}
    for path in sorted(cpu.glob("*.json")) if cpu is not None and cpu.is_dir() else []:
        r = _read(path)
        if "rows" in r:
            out[f"{r['shape']} on {r['device']} ({r['prompts']} prompts, {r['prompt_tokens']} + "
                f"{r['max_new_tokens']} tokens)"] = r
    return out


def control_claim(measured: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """bf16: every divergence of our AR loop from HF generate and of our trees from our AR loop is within twice the
    control's noise floor of the same model (the control: HF SDPA vs HF eager on the same weights and prompts);
    `measured`: `controls`' labelled results."""
    from spectree.claims.claims import Evidence, claim
    from spectree.claims.verdicts import BAR, FAILS, HOLDS, INCONCLUSIVE
    from spectree.speed.divergence import CONTROL, within_control

    ours, outside, n = [], [], 0
    for label, r in measured.items():
        rows = [x for x in r["rows"] if x["pair"] != CONTROL]
        n += len(rows)
        hit = [x for x in rows if x["first_divergence"] is not None]
        outside += [f"{x['pair']} at {x['first_divergence']} ({label}, gap {x['top2_gap']})" for x in hit
                    if not within_control(x["top2_gap"], r["floor"])]
        control_hits = sum(x["first_divergence"] is not None for x in r["rows"] if x["pair"] == CONTROL)
        ours.append(f"{label}: control diverged on {control_hits} prompts, ours on {len(hit)}/{len(rows)} "
                    f"pair-prompts, floor {r['floor']:.3g}")
    verdict = INCONCLUSIVE if not n else FAILS if outside else HOLDS
    return claim("bf16: our decoder's divergences from HF are rounding (within the control's noise floor)", "—",
                 "; ".join(ours) + (f"; outside: {'; '.join(outside)}" if outside else ""),
                 Evidence(verdict, "every divergence's top-2 gap ≤ 2 × the control's largest |Δ logit| (n: our "
                                   "decodes compared, a pair on a prompt)", n),
                 goal="no farther from HF than HF SDPA is from HF eager", kind=BAR)


def share_claim(cost: dict[str, Any], prompts: Optional[int] = None) -> dict[str, Any]:
    """Tree construction ≤ TREE_SHARE_BAR of a step for every family at the largest shape with shares measured.
    Its units are the `prompts` the one timing run decoded (each family's share is pooled over them; `env.json`'s
    plan, `share_prompts`), not the families: each family is one reading of its own share. Unknown: 0 units."""
    from spectree.claims.claims import Evidence, claim
    from spectree.claims.verdicts import BAR, FAILS, HOLDS, INCONCLUSIVE

    measured = {s: m for s, m in cost["shapes"].items() if m.get("tree_shares")}
    if not measured:
        return claim(f"tree construction ≤ {TREE_SHARE_BAR:.0%} of a decoding step for every family", "—",
                     "not measured", Evidence(INCONCLUSIVE, "no shares recorded", 0), goal=f"≤ {TREE_SHARE_BAR:.0%}",
                     kind=BAR)
    shape, m = list(measured.items())[-1]
    shares = {r["policy"]: r["tree_share"] for r in m["tree_shares"]}
    worst = max(shares, key=shares.get)
    verdict = HOLDS if shares[worst] <= TREE_SHARE_BAR else FAILS
    units = int(prompts or 0)
    return claim(f"tree construction ≤ {TREE_SHARE_BAR:.0%} of a decoding step for every family ({shape} shape)",
                 "—", f"max {100 * shares[worst]:.1f}% ({worst}), {len(shares)} families",
                 Evidence(verdict, f"one timing run's tree-construction share, pooled over its "
                                   f"{units or 'unrecorded'} prompts, every family", units),
                 goal=f"≤ {TREE_SHARE_BAR:.0%}", kind=BAR)


def _cost_summary(cost: dict[str, Any], summary: dict[str, Any], tables: dict[str, Any]) -> None:
    """Headlines per shape and regime (under the padding bound, as the projections read them) and the tables."""
    from spectree.speed.costmodel import padded, regime_entries

    p0 = str(cost["prefixes"][0])
    forward_rows = []
    for shape, m in cost["shapes"].items():
        for regime, r in regime_entries(m).items():
            if "target_s" not in r:
                if r.get("error"):
                    summary[f"{shape}: {regime} regime"] = f"failed: {r['error']}"
                continue
            one = padded(r["target_s"][p0])[0]
            summary[f"{shape} ({regime}): target forward, 1 token after {p0}"] = f"{1000 * one:.2f} ms"
            summary[f"{shape} ({regime}): one draft layer ÷ target"] = round(padded(r["draft_s"])[0] / one, 3)
            if "ar_over_hf" in r:
                summary[f"{shape} ({regime}): our AR loop ÷ HF generate"] = round(r["ar_over_hf"], 3)
            forward_rows += [{"shape": shape, "regime": regime, "prefix": p,
                              **{f"n={n}": round(1000 * t, 2) for n, t in zip(cost["sizes"], times)}}
                             for p, times in r["target_s"].items()]
        if m.get("tree_shares"):
            tables[f"tree construction share of a step, {shape}"] = m["tree_shares"]
    tables["target forward (ms) by tree tokens after a committed prefix, eager and CUDA graphs (as measured)"] = \
        forward_rows


def summarize(folder: Path) -> dict[str, Any]:
    """summary.json of the checklist's files in `folder`: headline numbers, claims and tables; written atomically."""
    from spectree.claims.text import jsonable

    if not (folder / "lossless.json").exists():
        raise SpectreeError(f"no lossless.json in {folder}: run scripts/gpu_check.sh on a CUDA machine")
    env = _read(folder / "env.json") if (folder / "env.json").exists() else {}
    lossless = _read(folder / "lossless.json")
    summary: dict[str, Any] = {"run": {k: env.get(k) for k in ("profile", "commit", "date", "host")},
                               "device": env.get("device"), "torch": env.get("torch"),
                               "transformers": env.get("transformers"), "lossless shape": lossless.get("shape")}
    optional = {name: _read(folder / f"{name}.json") if (folder / f"{name}.json").exists() else None
                for name in ("large", "control", "costmodel", "speed")}
    large, control = optional["large"], optional["control"]
    floors = control_floors(control)
    if large is not None:
        summary["lossless, large shape"] = large["shape"]
    claims, tables = [], {}
    for dtype, result in lossless.get("dtypes", {}).items():
        claims.append(lossless_claim(result, dtype, large, floors, lossless["shape"]))
        summary[f"lossless {dtype}"] = claims[-1]["ours"].split(";")[0]
        tables[f"lossless settings, {dtype}"] = result["rows"]
        if result.get("graphs", {}).get("rows"):
            claims.append(lossless_claim(result["graphs"], dtype, None, floors, lossless["shape"],
                                         ", through CUDA graphs"))
            summary[f"lossless {dtype}, CUDA graphs"] = claims[-1]["ours"].split(";")[0]
    measured = controls(control, str(env.get("device") or "the GPU"), folder.parent / CPU_CONTROL)
    if measured:
        from spectree.speed.divergence import noise_table, table

        claims.append(control_claim(measured))
        for label, r in measured.items():
            summary[f"bf16 control floor, {label}"] = round(r["floor"], 4)
            tables[f"bf16 first divergences, {label}"] = table(r).to_dict(orient="records")
            tables[f"bf16 logit noise against HF SDPA, {label}"] = noise_table(r).round(4).to_dict(orient="records")
    if optional["costmodel"] is not None:
        claims.append(share_claim(optional["costmodel"], (env.get("plan") or {}).get("share_prompts")))
        _cost_summary(optional["costmodel"], summary, tables)
    if optional["speed"] is not None and "rows" in optional["speed"]:
        speed = optional["speed"]
        tables[f"speed table, {speed['shape']} ({speed['dtype']}; mix rows synthetic: τ, γ only)"] = speed["rows"]
    errors = {name: r["error"] for name, r in {**optional, "lossless": lossless}.items() if r and r.get("error")}
    if errors:
        summary["steps that failed"] = "; ".join(f"{k}: {v}" for k, v in errors.items())
    summary.update(claims=claims, tables=tables)
    atomic_write_text(folder / "summary.json", json.dumps(jsonable(summary), indent=1) + "\n")
    return summary


__all__ = ["CPU_CONTROL", "TREE_SHARE_BAR", "control_claim", "controls", "control_floors", "lossless_claim",
           "share_claim", "summarize"]

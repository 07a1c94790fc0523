"""The GPU checklist: what a bare, offline CUDA machine runs in one command (`scripts/gpu_check.sh`), writing at most
8 files into one folder, which RESULTS.md renders (`results`, its GPU section) and notebook 11 projects with.

On random-weight Llama pairs built on the machine (`drafts.random_pairs`: no download, no model package; a forward
costs what the shape costs) and the tracked prompt file data/prompts/gpu_check.jsonl, it measures:

- **lossless** (`lossless.json`): greedy decoding in bfloat16 and float32 for one setting of every policy family and
  every retrieval mode against HF `generate` on the same model, each mismatch named with its top-2 logit gap
  (a near-tie is one rounding explains, `speed.bench.tie_gap`); the draft is `mix:λ` over a random one-layer
  draft, so that trees are accepted deep;
- **the GPU cost model** (`costmodel.json`) per target shape: the target's forward time by tree tokens after two
  committed lengths, one draft layer's (a one-layer draft of the target's width), our AR loop against HF `generate`
  on the same model, and each policy family's tree-construction time and share of a step (host ↔ device copies
  included: the decoder waits for the device after every forward, `core.treeattn.synchronize`);
- **lossless at the largest shape** (`large.json`): our AR loop and two trees against HF generate in each dtype at
  the 8B shape, where rounding noise is largest (its first run found bf16 mismatches there that the near-tie rule
  does not explain, and none in fp32);
- **a speed table** (`speed.json`) at the largest shape: the real random draft (real cost, agreement nil) and mix
  drafts of controlled agreement (rows marked synthetic: τ and γ only);
- `env.json` (versions, device) and `summary.json` (headline numbers, claims, tables).

    scripts/gpu_check.sh                      # on a CUDA machine: into figures/gpu_check/ (≤ 8 minutes on an H100)
    scripts/gpu_check.sh --dry-run            # the same steps on the CPU at tiny shapes (CI runs it)
    scripts/gpu_check.sh --summarize          # after copying a run's files into figures/gpu_check/: its summary and
                                              # RESULTS.md's GPU section, the notebooks' sections left as they are

Its imports are checked first (`missing_packages`), so a machine that lacks one is told which and how to carry it.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from spectree.core.errors import SpectreeError
from spectree.core.paths import atomic_write_text, figures_dir, home
from spectree.reports.results import GPU_STEM as STEM, refresh_gpu_section, stamp

# import name → pip name, of what the checklist's code path imports (all on the project's GPU image)
REQUIRED = {"torch": "torch", "transformers": "transformers", "numpy": "numpy", "pandas": "pandas", "scipy": "scipy",
            "safetensors": "safetensors", "tokenizers": "tokenizers", "tqdm": "tqdm", "yaml": "pyyaml",
            "pyarrow": "pyarrow", "accelerate": "accelerate"}
FAMILIES = ["chain:k=3", "kary:b=2,d=3", "vct:w=2,d=3", "sequences:k=3,d=3", "sequoia:n=8", "entropy:d=3",
            "naive_width:k=3,d=3", "eagle2:K=4,d_max=4,N=8", "dyspec:m=8,K=4,d_max=4",
            "dyspec_threshold:t=0.05,K=4,d_max=4", "pct:ratio=0.1,k=3,d_max=6", "cape:d=3",
            "c2t:beta=0.5,K=4,d_max=4,topk=8,classifier=smollm2-edd"]  # one setting per policy family
RETRIEVAL = ["ar+lookup", "ar+suffix:k=2", "chain:k=3+lookup+suffix:k=2"]  # every retrieval mode
SHARE_POLICIES = {"chain-4": "chain:k=4", "k-ary 2x4": "kary:b=2,d=4", "Sequoia n=32": "sequoia:n=32",
                  "EAGLE-2 N=32": "eagle2:K=8,d_max=6,N=32", "DySpec m=32": "dyspec:m=32,K=8,d_max=8",
                  "DySpec threshold": "dyspec_threshold:t=0.05,K=8,d_max=8", "PCT": "pct:ratio=0.05,k=5,d_max=8",
                  "CAPE": "cape:d=4", "B(H)": "entropy:d=4",
                  "C2T β=0.5": "c2t:beta=0.5,K=8,d_max=6,topk=8,classifier=smollm2-edd"}  # paper-sized trees
LARGE = {"AR (our loop)": "ar", "chain-4": "chain:k=4", "EAGLE-2 N=32": "eagle2:K=8,d_max=6,N=32"}  # at the 8B shape
SPEED_POLICIES = {"AR (our loop)": "ar", "chain-4": "chain:k=4", "EAGLE-2 N=32": "eagle2:K=8,d_max=6,N=32",
                  "DySpec m=32": "dyspec:m=32,K=8,d_max=8", "PCT": "pct:ratio=0.05,k=5,d_max=8"}
TREE_SHARE_BAR = 0.10  # issue 37: move what dominates where tree construction passes this share of a step


@dataclass(frozen=True)
class Plan:
    """What one checklist run does: the GPU run, or `dry_run()`'s tiny CPU version of the same steps."""

    device: str = "cuda"
    prompts: str = "data/prompts/gpu_check.jsonl"
    lossless_shape: str = "smollm2-135m"
    lossless_prompts: int = 4
    lossless_tokens: int = 24
    large_prompts: int = 2  # the lossless check at the largest cost shape: AR loop and two trees, each dtype
    lossless_mix: float = 0.7  # λ of the lossless check's draft: deep accepted paths
    cost_shapes: tuple = ("smollm2-135m", "llama-3.2-1b", "llama-3.1-8b")
    sizes: tuple = (1, 2, 4, 8, 16, 32, 64, 128)
    prefixes: tuple = (256, 2048)
    repeats: int = 5
    ar_prompts: int = 3
    share_prompts: int = 2
    tokens: int = 32  # new tokens per prompt of the AR, share and speed runs
    speed_prompts: int = 2
    weights: tuple = (0.6, 0.8)  # λ of the speed table's mix drafts
    dtypes: tuple = ("bfloat16", "float32")
    speed_dtype: str = "bfloat16"

    @classmethod
    def dry_run(cls, device: str = "cpu") -> "Plan":
        return cls(device=device, lossless_shape="tiny", lossless_prompts=2, lossless_tokens=8, large_prompts=1,
                   cost_shapes=("tiny",),
                   sizes=(1, 4, 16), prefixes=(32, 128), repeats=1, ar_prompts=1, share_prompts=1, tokens=8,
                   speed_prompts=1, weights=(0.8,))


def missing_packages() -> list[str]:
    """The pip names of the packages the checklist imports that this Python cannot find."""
    return [pip for module, pip in REQUIRED.items() if importlib.util.find_spec(module) is None]


def check_environment(plan: Plan) -> None:
    """One line, before anything loads: a missing package (and how to carry it to an offline machine), or no CUDA
    for a GPU run."""
    missing = missing_packages()
    if missing:
        raise SpectreeError(f"missing Python packages: {', '.join(missing)}. On an offline machine carry them as wheels "
                            f"in the working tree: here `pip download --no-deps --only-binary=:all: -d .whl "
                            f"{' '.join(missing)}` (for that machine's Python), there `pip install --no-index "
                            f"--no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site`")
    import torch

    if plan.device.startswith("cuda") and not torch.cuda.is_available():
        raise SpectreeError("no CUDA device: the GPU checklist needs one (`--dry-run` runs its steps on the CPU)")


def environment(plan: Plan) -> dict[str, Any]:
    import torch
    import transformers

    cuda = plan.device.startswith("cuda")
    return {"python": sys.version.split()[0], "torch": torch.__version__, "transformers": transformers.__version__,
            "device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "capability": ".".join(map(str, torch.cuda.get_device_capability(0))) if cuda else None,
            "plan": asdict(plan), **stamp("gpu_check")}


def _prompts(plan: Plan, n: int) -> list:
    from spectree.prompts import parse_prompt_spec

    return parse_prompt_spec(f"jsonl:{home() / plan.prompts}:{n}")


def _dtype(name: str):
    import torch

    return getattr(torch, name)


def _release(*models) -> None:
    import gc

    import torch

    del models
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def report_only(result: dict[str, Any], line: str) -> None:
    """A step's `save` outside `run_checklist`: the progress line alone (`run_checklist`'s also writes the file)."""
    print(line, flush=True)


def lossless_step(plan: Plan, save=report_only) -> dict[str, Any]:
    """Every family's setting and every retrieval mode against HF generate, greedy, in each dtype (`lossless.json`)."""
    from spectree.core.decode import as_drafter
    from spectree.drafts.mix import MixDrafter
    from spectree.drafts.random_pairs import random_pair
    from spectree.speed.bench import find_mismatches, run_strategies
    from spectree.speed.tables import speed_table
    from spectree.strategies import parse_strategy

    prompts = _prompts(plan, plan.lossless_prompts)
    policies = {spec: parse_strategy(spec) for spec in FAMILIES + RETRIEVAL}
    out: dict[str, Any] = {"shape": plan.lossless_shape, "mix": plan.lossless_mix, "prompts": len(prompts),
                           "max_new_tokens": plan.lossless_tokens, "dtypes": {}}
    for name in plan.dtypes:
        target, draft, tok = random_pair(plan.lossless_shape, plan.device, _dtype(name))
        models = (target, MixDrafter(as_drafter(draft), target, plan.lossless_mix), tok)
        skipped: dict[str, str] = {}
        runs = run_strategies(models, prompts, policies, plan.lossless_tokens, warmup=False, hf_packed=False,
                              skipped=skipped)
        mismatches = find_mismatches(models, runs, prompts)
        table = speed_table(runs)
        rows = [{"setting": r.strategy, "exact": r.exact, "tau": r.tau, "gamma": r.gamma}
                for r in table.itertuples() if r.strategy in policies]
        out["dtypes"][name] = {"checked": len(prompts) * len(rows), "rows": rows, "skipped": skipped,
                               "mismatches": [asdict(m) for m in mismatches]}
        _release(target, draft, models)
        save(out, f"lossless {name}: {len(mismatches)} mismatches of {len(prompts) * len(rows)}")
    return out


def large_step(plan: Plan, save=report_only) -> dict[str, Any]:
    """The lossless check at the largest cost shape, where rounding noise is largest (`large.json`): our AR loop and
    two trees against HF generate, greedy, in each dtype, on the random draft (real trees, little accepted)."""
    from spectree.drafts.random_pairs import random_pair
    from spectree.speed.bench import find_mismatches, run_strategies
    from spectree.strategies import parse_strategy

    shape, prompts = plan.cost_shapes[-1], _prompts(plan, plan.large_prompts)
    policies = {k: parse_strategy(v) for k, v in LARGE.items()}
    out: dict[str, Any] = {"shape": shape, "prompts": len(prompts), "max_new_tokens": plan.tokens,
                           "policies": LARGE, "dtypes": {}}
    for name in plan.dtypes:
        t0 = time.perf_counter()
        target, draft, tok = random_pair(shape, plan.device, _dtype(name))
        runs = run_strategies((target, draft, tok), prompts, policies, plan.tokens, warmup=False, hf_packed=False)
        mismatches = find_mismatches((target, draft, tok), runs, prompts)
        out["dtypes"][name] = {"checked": len(prompts) * len(policies), "mismatches": [asdict(m) for m in mismatches],
                               "seconds": round(time.perf_counter() - t0, 1)}
        _release(target, draft)
        save(out, f"large {name}: {len(mismatches)} mismatches of {len(prompts) * len(policies)}")
    return out


def cost_step(plan: Plan, save=report_only) -> dict[str, Any]:
    """Per target shape: forward times by tree tokens, one draft layer's, the step model fitted on live steps over
    those curves (`speed.stepmodel`, as on the CPU), our AR loop against HF generate, and the tree-construction
    share of every family's step (`costmodel.json`, saved after each shape through `save`, so a run cut short keeps
    the shapes it measured)."""
    from spectree.core.kernels import machine_id
    from spectree.drafts.random_pairs import random_pair
    from spectree.speed.bench import run_strategies
    from spectree.speed.costmodel import CostModel, padded, time_forwards
    from spectree.speed.stepmodel import measure_fit
    from spectree.speed.tables import speed_table
    from spectree.strategies import autoregressive, parse_strategy

    import torch

    device = torch.cuda.get_device_name(0) if plan.device.startswith("cuda") else "cpu"
    machine = machine_id()
    out: dict[str, Any] = {"machine": machine, "device": device, "dtype": plan.speed_dtype,
                           "sizes": list(plan.sizes),
                           "prefixes": list(plan.prefixes), "shapes": {}}
    for shape in plan.cost_shapes:
        t0 = time.perf_counter()
        target, draft, tok = random_pair(shape, plan.device, _dtype(plan.speed_dtype))
        forward = {str(p): time_forwards(target, plan.sizes, p, plan.repeats) for p in plan.prefixes}
        draft_s = time_forwards(draft, plan.sizes, plan.prefixes[0], plan.repeats)
        ar = speed_table(run_strategies((target, draft, tok), _prompts(plan, plan.ar_prompts),
                                        {"AR (our loop)": autoregressive()}, plan.tokens)).set_index("method")
        share = speed_table(run_strategies((target, draft, tok), _prompts(plan, plan.share_prompts),
                                           {k: parse_strategy(v) for k, v in SHARE_POLICIES.items()}, plan.tokens))
        shares = [{"policy": r.method, "tree_share": r.tree_frac, "draft_share": r.draft_frac,
                   "verify_share": r.verify_frac, "ms_per_token": r.ms_per_token, "tau": r.tau, "gamma": r.gamma}
                  for r in share.itertuples() if r.method in SHARE_POLICIES]
        curves = CostModel(machine, plan.prefixes[0], list(plan.sizes), padded(forward[str(plan.prefixes[0])]),
                           padded(draft_s))  # as `quality.gpu_cost_models` reads them back
        step = measure_fit((target, draft, tok), curves, f"{shape} random pair on {plan.prompts}",
                           prompts=_prompts(plan, plan.share_prompts), max_new_tokens=plan.tokens)
        out["shapes"][shape] = {"target_s": forward, "draft_s": draft_s, "step": asdict(step),
                                "ar_over_hf": float(ar.loc["AR (our loop)", "speedup"]),
                                "hf_tokens_per_s": float(ar.loc["HF generate", "tokens_per_s"]),
                                "tree_shares": shares, "seconds": round(time.perf_counter() - t0, 1)}
        _release(target, draft)
        save(out, f"costmodel {shape}: {out['shapes'][shape]['seconds']} s")
    return out


def speed_step(plan: Plan, save=report_only) -> dict[str, Any]:
    """The speed table at the largest shape: the random draft's rows (real cost) and each mix draft's (synthetic)
    in one run (`speed.json`)."""
    from spectree.core.decode import as_drafter
    from spectree.drafts.mix import MixDrafter
    from spectree.drafts.random_pairs import random_pair
    from spectree.speed.bench import run_strategies
    from spectree.speed.tables import speed_table
    from spectree.strategies import parse_strategy

    shape = plan.cost_shapes[-1]
    target, draft, tok = random_pair(shape, plan.device, _dtype(plan.speed_dtype))
    policies = {k: parse_strategy(v) for k, v in SPEED_POLICIES.items()}
    mixes = {w: MixDrafter(as_drafter(draft), target, w) for w in plan.weights}
    labelled = {**policies, **{f"{k} (mix {w:g})": p for w in plan.weights for k, p in policies.items() if p.d_max}}
    drafts = {f"{k} (mix {w:g})": mixes[w] for w in plan.weights for k, p in policies.items() if p.d_max}
    table = speed_table(run_strategies((target, draft, tok), _prompts(plan, plan.speed_prompts), labelled, plan.tokens,
                                       drafts=drafts))
    _release(target, draft, mixes)
    keep = ["method", "tokens_per_s", "speedup", "tau", "gamma", "draft_frac", "verify_frac", "tree_frac", "exact"]
    return {"shape": shape, "dtype": plan.speed_dtype, "weights": list(plan.weights),
            "rows": table[[c for c in keep if c in table]].assign(
                synthetic=table.get("synthetic", False)).to_dict(orient="records")}


STEPS = {"lossless": lossless_step, "costmodel": cost_step, "large": large_step, "speed": speed_step}


def run_checklist(plan: Plan, out: Path) -> dict[str, Any]:
    """Every step into `out` (one JSON file each, written as soon as it is done), then summary.json."""
    from spectree.analysis.claims import jsonable

    check_environment(plan)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "env.json", json.dumps(jsonable(environment(plan)), indent=1) + "\n")
    for name, step in STEPS.items():
        t0 = time.perf_counter()

        def save(result: dict[str, Any], line: str, path: Path = out / f"{name}.json") -> None:
            """A finished unit of the step (a dtype, a shape): its file now, so a run cut short keeps it."""
            result["seconds"] = round(time.perf_counter() - t0, 1)
            atomic_write_text(path, json.dumps(jsonable(result), indent=1) + "\n")
            print(line, flush=True)

        result = step(plan, save)
        save(result, f"{name}: {time.perf_counter() - t0:.1f} s")
    return summarize(out)


# --- the summary (RESULTS.md's GPU section) ------------------------------------------------------------------

def _read(path: Path) -> dict[str, Any]:
    from spectree.core.manifest import read_json_object

    return read_json_object(path, "a GPU checklist result", "; rerun scripts/gpu_check.sh")


def _named(m: dict[str, Any]) -> str:
    top1 = m.get("top1")
    of = f" of a top-1 logit {top1:.3g}" if top1 is not None and top1 == top1 else ""  # NaN: not recorded
    return f"{m['strategy']} on {m['prompt']}{m.get('where', '')} at {m['position']} (gap {m['top2_gap']:.2g}{of})"


def lossless_claim(result: dict[str, Any], dtype: str, large: dict[str, Any] | None = None) -> dict[str, Any]:
    """One dtype's lossless result (and the large shape's, `large_step`) → the claim "greedy decoding is
    lossless": it holds when no generation differs from HF generate except at a near-tie (the AR top-2 logit gap
    under the dtype's threshold), does not hold at the first other mismatch, and is inconclusive while a setting was
    skipped. A deterministic count, n = generations checked; every mismatch is named."""
    from spectree.analysis.claims import FAILS, HOLDS, INCONCLUSIVE, Evidence, claim

    checked, mismatches = int(result["checked"]), list(result["mismatches"])
    if large is not None and dtype in large["dtypes"]:
        checked += int(large["dtypes"][dtype]["checked"])
        mismatches += [{**m, "where": f" ({large['shape']})"} for m in large["dtypes"][dtype]["mismatches"]]
    ties = [m for m in mismatches if m["tie"]]
    bugs = [m for m in mismatches if not m["tie"]]
    rule = (f"every generation equals HF generate, lengths included; a mismatch passes only at a near-tie of "
            f"{dtype}'s logit noise")

    def names(ms: list) -> str:
        return "; ".join(map(_named, ms[:5])) + ("; …" if len(ms) > 5 else "")

    ours = (f"{checked - len(mismatches)}/{checked} identical, {len(bugs)} not a near-tie"
            + (f"; not near-ties: {names(bugs)}" if bugs else "") + (f"; near-ties: {names(ties)}" if ties else ""))
    verdict = FAILS if bugs else INCONCLUSIVE if not checked or result.get("skipped") else HOLDS
    evidence = Evidence(verdict, rule + ", every setting run", checked)
    return claim(f"greedy speculative decoding is lossless on the GPU ({dtype})", "lossless", ours, evidence)


def share_claim(cost: dict[str, Any]) -> dict[str, Any]:
    """Tree construction ≤ TREE_SHARE_BAR of a step for every family at the largest measured shape."""
    from spectree.analysis.claims import FAILS, HOLDS, Evidence, claim

    shape, measured = list(cost["shapes"].items())[-1]
    shares = {r["policy"]: r["tree_share"] for r in measured["tree_shares"]}
    worst = max(shares, key=shares.get)
    verdict = HOLDS if shares[worst] <= TREE_SHARE_BAR else FAILS
    return claim(f"tree construction ≤ {TREE_SHARE_BAR:.0%} of a decoding step for every family ({shape} shape)",
                 f"≤ {TREE_SHARE_BAR:.0%}", f"max {100 * shares[worst]:.1f}% ({worst})",
                 Evidence(verdict, "one run's pooled tree-construction share, every family", len(shares)))


def summarize(folder: Path) -> dict[str, Any]:
    """summary.json of the checklist's files in `folder`: headline numbers, claims and tables; written atomically."""
    from spectree.analysis.claims import jsonable
    from spectree.speed.costmodel import padded

    if not (folder / "lossless.json").exists():
        raise SpectreeError(f"no lossless.json in {folder}: run scripts/gpu_check.sh on a CUDA machine")
    env = _read(folder / "env.json") if (folder / "env.json").exists() else {}
    lossless = _read(folder / "lossless.json")
    summary: dict[str, Any] = {"run": {k: env.get(k) for k in ("profile", "commit", "date", "host")},
                               "device": env.get("device"), "torch": env.get("torch"),
                               "transformers": env.get("transformers"), "lossless shape": lossless["shape"]}
    large = _read(folder / "large.json") if (folder / "large.json").exists() else None
    if large is not None:
        summary["lossless, large shape"] = large["shape"]
    claims, tables = [], {}
    for dtype, result in lossless["dtypes"].items():
        claims.append(lossless_claim(result, dtype, large))
        summary[f"lossless {dtype}"] = claims[-1]["ours"].split(";")[0]
        tables[f"lossless settings, {dtype}"] = result["rows"]
    if (folder / "costmodel.json").exists():
        cost = _read(folder / "costmodel.json")
        claims.append(share_claim(cost))
        forward_rows = []
        for shape, m in cost["shapes"].items():  # headlines under the padding bound, as the projections read them
            one = padded(m["target_s"][str(cost["prefixes"][0])])[0]
            summary[f"{shape}: target forward, 1 token after {cost['prefixes'][0]}"] = f"{1000 * one:.2f} ms"
            summary[f"{shape}: one draft layer ÷ target"] = round(padded(m["draft_s"])[0] / one, 3)
            summary[f"{shape}: our AR loop ÷ HF generate"] = round(m["ar_over_hf"], 3)
            forward_rows += [{"shape": shape, "prefix": p, **{f"n={n}": round(1000 * t, 2) for n, t in
                                                              zip(cost["sizes"], times)}}
                             for p, times in m["target_s"].items()]
            tables[f"tree construction share of a step, {shape}"] = m["tree_shares"]
        tables["target forward (ms) by tree tokens after a committed prefix (as measured)"] = forward_rows
    if (folder / "speed.json").exists():
        speed = _read(folder / "speed.json")
        tables[f"speed table, {speed['shape']} ({speed['dtype']}; mix rows synthetic: τ, γ only)"] = speed["rows"]
    summary.update(claims=claims, tables=tables)
    atomic_write_text(folder / "summary.json", json.dumps(jsonable(summary), indent=1) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/gpu_check.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="the same steps on the CPU at tiny shapes")
    parser.add_argument("--device", help="cuda (default) or cpu (with --dry-run)")
    parser.add_argument("--out", type=Path, help="output folder (default: figures/gpu_check, or "
                                                  "figures/gpu_check-dry-run with --dry-run)")
    parser.add_argument("--summarize", action="store_true", help="only rewrite summary.json from the folder's files")
    args = parser.parse_args(argv)
    try:
        plan = Plan.dry_run(args.device or "cpu") if args.dry_run else replace(Plan(), device=args.device or "cuda")
        out = args.out or figures_dir() / (f"{STEM}-dry-run" if args.dry_run else STEM)
        summary = summarize(out) if args.summarize else run_checklist(plan, out)
        if out.resolve() == (figures_dir() / STEM).resolve():  # the committed files: RESULTS.md shows them
            for results in (home() / "RESULTS.md", figures_dir() / "RESULTS.md"):
                if results.exists():
                    refresh_gpu_section(results)
    except SpectreeError as err:
        print(f"gpu_check: error: {err}", file=sys.stderr)
        return 2
    print(f"{out}: " + ", ".join(f"{c['name']}: {c['verdict']}" for c in summary["claims"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

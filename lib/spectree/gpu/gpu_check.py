"""The GPU checklist: what a bare, offline CUDA machine runs in one command (`scripts/gpu_check.sh`), writing at most
8 files into one folder, which RESULTS.md renders (`results`, its GPU section, from `gpu_summary`) and notebooks 11
and 13 project with.

On random-weight Llama pairs built on the machine (`models.random_pairs`: no download, no model package; a forward
costs what the shape costs) and the tracked prompt file data/prompts/gpu_check.jsonl, it measures, most needed first:

- **the bf16 control** (`control.json`, `speed.divergence`) per cost shape: HF `generate` with SDPA against HF
  `generate` with eager attention (the noise floor), our AR loop against each, our trees against our AR loop: first
  divergences, top-2 gaps, teacher-forced logit noise;
- **the GPU cost model in two regimes** (`costmodel.json`) per target shape: eager PyTorch (the papers' timings) and
  CUDA graphs on a static KV slab at padded tree sizes (`core.graphs`, the engines'): the target's forward time by
  tree tokens after two committed lengths, one draft layer's, the step model fitted on live steps of that regime, our
  AR loop against HF `generate`; at the largest shape also each policy family's tree-construction share of a step;
- **lossless** (`lossless.json`): greedy decoding in bfloat16 and float32 for one setting of every policy family and
  every retrieval mode against HF `generate` on the same model, and again through CUDA graphs, each mismatch named
  with its top-2 logit gap; the draft is `mix:λ` over a random one-layer draft, so that trees are accepted deep;
- **lossless at the largest shape** (`large.json`): our AR loop and two trees against HF generate in each dtype;
- **a speed table** (`speed.json`) at the largest shape, when time is left (`Plan.budget_s`);
- `env.json` (versions, device) and `summary.json` (headline numbers, claims, tables).

A step that fails is recorded in its file (`error`) and the others still run; a step that would start past the time
budget is skipped, so that one window on a lent GPU returns everything it measured.

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
from spectree.gpu.gpu_summary import summarize
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
GRAPH_SETTINGS = ["chain:k=3", "kary:b=2,d=3", "eagle2:K=4,d_max=4,N=8", "dyspec:m=8,K=4,d_max=4",
                  "pct:ratio=0.1,k=3,d_max=6"]  # lossless through CUDA graphs: chains and trees of every width


@dataclass(frozen=True)
class Plan:
    """What one checklist run does: the GPU run, or `dry_run()`'s tiny CPU version of the same steps."""

    device: str = "cuda"
    prompts: str = "data/prompts/gpu_check.jsonl"
    lossless_shape: str = "smollm2-135m"
    lossless_prompts: int = 3
    lossless_tokens: int = 24
    large_prompts: int = 2  # the lossless check at the largest cost shape: AR loop and two trees, each dtype
    lossless_mix: float = 0.7  # λ of the lossless check's draft: deep accepted paths
    cost_shapes: tuple = ("smollm2-135m", "llama-3.2-1b", "llama-3.1-8b")
    share_shapes: tuple = ("llama-3.1-8b",)  # where each family's tree-construction share is measured
    regimes: tuple = ("eager", "graphs")  # `speed.costmodel.REGIMES`
    sizes: tuple = (1, 2, 4, 8, 16, 32, 64, 128)  # = `core.graphs.BUCKETS`: each padded size is timed as captured
    prefixes: tuple = (256, 2048)
    repeats: int = 5
    ar_prompts: int = 3
    share_prompts: int = 2
    tokens: int = 32  # new tokens per prompt of the AR, share and speed runs
    control_prompts: int = 4  # the bf16 control (`speed.divergence`): tracked prompts cut to control_prompt_tokens
    control_prompt_tokens: int = 64
    control_tokens: int = 24
    speed_prompts: int = 2
    weights: tuple = (0.6, 0.8)  # λ of the speed table's mix drafts
    dtypes: tuple = ("bfloat16", "float32")
    speed_dtype: str = "bfloat16"
    budget_s: float = 420.0  # no step starts after this many seconds (one lent GPU window, with margin)

    @classmethod
    def dry_run(cls, device: str = "cpu") -> "Plan":
        return cls(device=device, lossless_shape="tiny", lossless_prompts=2, lossless_tokens=8, large_prompts=1,
                   cost_shapes=("tiny",), share_shapes=("tiny",),
                   sizes=(1, 4, 16), prefixes=(32, 128), repeats=1, ar_prompts=1, share_prompts=1, tokens=8,
                   control_prompts=1, control_prompt_tokens=32, control_tokens=8,
                   speed_prompts=1, weights=(0.8,), budget_s=float("inf"))


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


def _lossless(models, prompts, policies: dict, tokens: int) -> dict[str, Any]:
    """The settings `policies` against HF generate, greedy: rows (exact, τ, γ), skipped settings, mismatches."""
    from spectree.speed.bench import find_mismatches, run_strategies
    from spectree.speed.tables import speed_table

    skipped: dict[str, str] = {}
    runs = run_strategies(models, prompts, policies, tokens, warmup=False, hf_packed=False, skipped=skipped)
    mismatches = find_mismatches(models, runs, prompts)
    rows = [{"setting": r.strategy, "exact": r.exact, "tau": r.tau, "gamma": r.gamma}
            for r in speed_table(runs).itertuples() if r.strategy in policies]
    return {"checked": len(prompts) * len(rows), "rows": rows, "skipped": skipped,
            "mismatches": [asdict(m) for m in mismatches]}


def lossless_step(plan: Plan, save=report_only) -> dict[str, Any]:
    """Every family's setting and every retrieval mode against HF generate, greedy, in each dtype, and the
    GRAPH_SETTINGS again with the target's and draft's forwards replayed from CUDA graphs (`lossless.json`)."""
    from spectree.core.decode import as_drafter
    from spectree.core.graphs import cuda_graphs
    from spectree.drafts.mix import MixDrafter
    from spectree.models.random_pairs import random_pair
    from spectree.strategies import parse_strategy

    prompts = _prompts(plan, plan.lossless_prompts)
    out: dict[str, Any] = {"shape": plan.lossless_shape, "mix": plan.lossless_mix, "prompts": len(prompts),
                           "max_new_tokens": plan.lossless_tokens, "dtypes": {}}
    for name in plan.dtypes:
        target, draft, tok = random_pair(plan.lossless_shape, plan.device, _dtype(name))
        models = (target, MixDrafter(as_drafter(draft), target, plan.lossless_mix), tok)
        result = out["dtypes"][name] = _lossless(models, prompts, {s: parse_strategy(s) for s in FAMILIES + RETRIEVAL},
                                                 plan.lossless_tokens)
        try:
            with cuda_graphs(target, draft):
                result["graphs"] = _lossless(models, prompts, {s: parse_strategy(s) for s in GRAPH_SETTINGS},
                                             plan.lossless_tokens)
        except Exception as err:  # noqa: BLE001 — recorded: the eager result above still stands
            result["graphs"] = {"error": _error(err)}
        _release(target, draft, models)
        graphs = result["graphs"]
        save(out, f"lossless {name}: {len(result['mismatches'])} mismatches of {result['checked']}; through graphs: "
                  + (f"{len(graphs['mismatches'])} of {graphs['checked']}" if "checked" in graphs else graphs["error"]))
    return out


def control_step(plan: Plan, save=report_only) -> dict[str, Any]:
    """The bf16 control per cost shape (`speed.divergence.run`; `control.json`)."""
    from spectree.speed.divergence import run

    out: dict[str, Any] = {"dtype": "bfloat16", "shapes": {}}
    for shape in plan.cost_shapes:
        try:
            out["shapes"][shape] = run(shape, "bfloat16", plan.device, plan.control_prompts,
                                       plan.control_prompt_tokens, plan.control_tokens, plan.prompts)
        except Exception as err:  # noqa: BLE001 — recorded; the next shape still runs
            out["shapes"][shape] = {"error": _error(err)}
        _release()
        r = out["shapes"][shape]
        save(out, f"control {shape}: " + (f"floor {r['floor']:.3g}, {r['seconds']} s" if "floor" in r else r["error"]))
    return out


def large_step(plan: Plan, save=report_only) -> dict[str, Any]:
    """The lossless check at the largest cost shape, where rounding noise is largest (`large.json`): our AR loop and
    two trees against HF generate, greedy, in each dtype, on the random draft (real trees, little accepted)."""
    from spectree.models.random_pairs import random_pair
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


def _regime_costs(plan: Plan, models, regime: str, machine: str, shape: str) -> dict[str, Any]:
    """One regime's forward curves, step model and AR loop against HF generate (`cost_step`)."""
    from contextlib import nullcontext

    from spectree.core.graphs import cuda_graphs
    from spectree.speed.bench import run_strategies
    from spectree.speed.costmodel import CostModel, padded, time_forwards
    from spectree.speed.stepmodel import measure_fit
    from spectree.speed.tables import speed_table
    from spectree.strategies.chain import autoregressive

    target, draft, tok = models
    forward = {str(p): time_forwards(target, plan.sizes, p, plan.repeats, regime) for p in plan.prefixes}
    draft_s = time_forwards(draft, plan.sizes, plan.prefixes[0], plan.repeats, regime)
    curves = CostModel(machine, plan.prefixes[0], list(plan.sizes), padded(forward[str(plan.prefixes[0])]),
                       padded(draft_s))  # as `quality.gpu_cost_models` reads them back
    with cuda_graphs(target, draft) if regime == "graphs" else nullcontext():
        step = measure_fit(models, curves, f"{shape} random pair on {plan.prompts}, {regime}",
                           prompts=_prompts(plan, plan.share_prompts), max_new_tokens=plan.tokens)
        ar = speed_table(run_strategies(models, _prompts(plan, plan.ar_prompts), {"AR (our loop)": autoregressive()},
                                        plan.tokens)).set_index("method")
    return {"target_s": forward, "draft_s": draft_s, "step": asdict(step),
            "ar_over_hf": float(ar.loc["AR (our loop)", "speedup"]),
            "hf_tokens_per_s": float(ar.loc["HF generate", "tokens_per_s"])}


def cost_step(plan: Plan, save=report_only) -> dict[str, Any]:
    """Per target shape and regime (eager; CUDA graphs): forward times by tree tokens, one draft layer's, the step
    model fitted on live steps over those curves (`speed.stepmodel`, as on the CPU), our AR loop against HF generate;
    at the share shapes each family's tree-construction share of a step (eager, the papers' regime)
    (`costmodel.json`, saved after each shape through `save`, so a run cut short keeps the shapes it measured). The
    eager regime's numbers sit at the shape's top level, the graphs regime's under "graphs"."""
    from spectree.core.machine import machine_id
    from spectree.models.random_pairs import random_pair
    from spectree.speed.bench import run_strategies
    from spectree.speed.costmodel import record_regime
    from spectree.speed.tables import speed_table
    from spectree.strategies import parse_strategy

    import torch

    device = torch.cuda.get_device_name(0) if plan.device.startswith("cuda") else "cpu"
    machine = machine_id()
    out: dict[str, Any] = {"machine": machine, "device": device, "dtype": plan.speed_dtype, "sizes": list(plan.sizes),
                           "prefixes": list(plan.prefixes), "regimes": list(plan.regimes), "shapes": {}}
    for shape in plan.cost_shapes:
        t0 = time.perf_counter()
        models = random_pair(shape, plan.device, _dtype(plan.speed_dtype))
        entry = out["shapes"][shape] = {}
        for regime in plan.regimes:
            try:
                measured = _regime_costs(plan, models, regime, machine, shape)
            except Exception as err:  # noqa: BLE001 — recorded; the other regime and shapes still run
                measured = {"error": _error(err)}
            record_regime(entry, regime, measured)
        if shape in plan.share_shapes:
            share = speed_table(run_strategies(models, _prompts(plan, plan.share_prompts),
                                               {k: parse_strategy(v) for k, v in SHARE_POLICIES.items()}, plan.tokens))
            entry["tree_shares"] = [
                {"policy": r.method, "tree_share": r.tree_frac, "draft_share": r.draft_frac,
                 "verify_share": r.verify_frac, "ms_per_token": r.ms_per_token, "tau": r.tau, "gamma": r.gamma}
                for r in share.itertuples() if r.method in SHARE_POLICIES]
        entry["seconds"] = round(time.perf_counter() - t0, 1)
        _release(*models)
        save(out, f"costmodel {shape}: {entry['seconds']} s")
    return out


def speed_step(plan: Plan, save=report_only) -> dict[str, Any]:
    """The speed table at the largest shape: the random draft's rows (real cost) and each mix draft's (synthetic)
    in one run (`speed.json`)."""
    from spectree.core.decode import as_drafter
    from spectree.drafts.mix import MixDrafter
    from spectree.models.random_pairs import random_pair
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


STEPS = {"control": control_step, "costmodel": cost_step, "lossless": lossless_step, "large": large_step,
         "speed": speed_step}  # in the order of need: a window cut short keeps the first


def _error(err: BaseException) -> str:
    import traceback

    where = traceback.extract_tb(err.__traceback__)[-1]
    return f"{type(err).__name__}: {err} ({Path(where.filename).name}:{where.lineno})"


def run_checklist(plan: Plan, out: Path) -> dict[str, Any]:
    """Every step into `out` (one JSON file each, written as soon as a unit of it is done), then summary.json. A
    step that raises is recorded in its file (`error`) and the next runs; none starts after `plan.budget_s`."""
    from spectree.claims.text import jsonable

    check_environment(plan)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "env.json", json.dumps(jsonable(environment(plan)), indent=1) + "\n")
    begin = time.perf_counter()
    for name, step in STEPS.items():
        t0, saved = time.perf_counter(), {}

        def save(result: dict[str, Any], line: str, path: Path = out / f"{name}.json") -> None:
            """A finished unit of the step (a dtype, a shape): its file now, so a run cut short keeps it."""
            saved.update(result)
            result["seconds"] = round(time.perf_counter() - t0, 1)
            atomic_write_text(path, json.dumps(jsonable(result), indent=1) + "\n")
            print(line, flush=True)

        if t0 - begin > plan.budget_s:
            print(f"{name}: skipped, {t0 - begin:.0f} s of the {plan.budget_s:.0f} s budget spent", flush=True)
            continue
        try:
            result = step(plan, save)
        except SpectreeError:
            raise
        except Exception as err:  # noqa: BLE001 — one window on a lent GPU: record it and run the next step
            result = {**saved, "error": _error(err)}  # what the step had saved, and why it stopped
        save(result, f"{name}: {time.perf_counter() - t0:.1f} s" + (f" ({result['error']})" if "error" in result
                                                                      else ""))
    return summarize(out)


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

"""The commands behind `python -m spectree`: each checks its arguments (before any model loads), then runs."""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, fields
from pathlib import Path
from typing import Optional

from spectree.core.errors import SpectreeError
from spectree.core.paths import atomic_write_text, check_name, repair_hint

def _write_json(path: Path | None, payload: dict) -> None:
    if path:
        atomic_write_text(path, json.dumps(payload, indent=1, default=str))
        print(f"wrote {path}")


def _policies(specs: list[str]) -> dict:
    """{spec as typed: policy}: every strategy parsed (and refused, one line) before a model loads."""
    from spectree.strategies import parse_strategy

    return {s: parse_strategy(s) for s in specs}


def _checked_prompts(args, depth: int, new_tokens: str = "--max-new-tokens") -> list:
    """`--prompts`, each checked against `--pair`'s target with `--max-new-tokens` (`new_tokens`: the flag that sets
    it) and trees `depth` deep (its tokenizer and config only: before any model loads); a bad pair is named before a
    bad prompt spec."""
    from spectree.models.pairs import check_pair_name, check_pair_prompts
    from spectree.prompts import parse_prompt_spec

    args.pair = check_pair_name(args.pair)  # parsed and checked once: a `Pair` from here down
    prompts = parse_prompt_spec(args.prompts)
    check_pair_prompts(args.pair, prompts, args.max_new_tokens, depth, new_tokens=new_tokens)
    return prompts


def _placed(args) -> dict:
    """load_pair's dtype and device from `--dtype` / `--device`."""
    return {"dtype": args.dtype, "device": args.device}


def _calibrated(policies: dict, pair: str, models, cost=None) -> dict:
    """PCT specs that name no ratio take this machine's s_d/s_t as EDD measures it (the mean of the forwards PCT
    construction makes, `costmodel.construction_ratio`, from the pair's cost model: `cost` when given)."""
    from spectree.speed.costmodel import calibrate, construction_ratio, pair_cost_model

    out = calibrate(policies, lambda: construction_ratio(pair, models, cost or pair_cost_model(pair, models)).ratio)
    for label, policy in out.items():
        if policy is not policies[label]:
            print(f"{label}: measured s_d/s_t → {policy.spec}")
    return out


def cmd_bench(args) -> int:
    from spectree.core.sampling import Sampling
    from spectree.models.loading import load_pair
    from spectree.claims.text import claims_text
    from spectree.speed.bench import format_table, run_strategies, summarize_runs
    from spectree.speed.costmodel import pair_cost_model
    from spectree.speed.references import HF_LOOKUP_PACKED
    from spectree.speed.speed_claims import lookup_claim
    from spectree.speed.tables import prompt_rows, speculative, speed_table
    from spectree.speed.stepmodel import residual_lines

    policies = _policies(args.strategies)
    sampling = Sampling(args.temperature, args.top_p)
    prompts = _checked_prompts(args, max(p.max_depth for p in policies.values()))
    if args.hf_assisted:
        _check_assistant(args.pair)
    skipped: dict[str, str] = {}
    models = load_pair(args.pair, kernels=args.kernels, **_placed(args))
    cost = pair_cost_model(args.pair, models)  # with its step model: the `projected` column
    policies = _calibrated(policies, args.pair, models, cost)
    runs = run_strategies(models, prompts, policies, args.max_new_tokens, sampling, args.seed,
                          hf_assisted=args.hf_assisted, skipped=skipped, hf_lookup=args.hf_prompt_lookup,
                          repeats=args.repeats, cost=cost)
    table = summarize_runs(runs)  # no `exact` column for sampled runs (`Run.sampled`)
    print(f"pair={args.pair} prompts={args.prompts} ({len(prompts)}) max_new_tokens={args.max_new_tokens} "
          f"temperature={args.temperature} top_p={args.top_p} dtype={str(models[0].dtype).removeprefix('torch.')} "
          f"device={models[0].device}")
    print(format_table(table))
    if cost.step is not None:  # what `projected` rests on: the step model's error on its own live steps
        print(f"step model ({cost.step.n_steps} live steps of {cost.step.source}), |predicted / measured − 1|:")
        print("\n".join(f"  {line}" for line in residual_lines(cost.step)))
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    if sampling.greedy and (table.strategy == HF_LOOKUP_PACKED).any() and len(speculative(speed_table(runs))):
        print(claims_text([lookup_claim(prompt_rows(runs), speed_table(runs))]))
    _write_json(args.json, {"config": vars(args), "rows": table.to_dict(orient="records"), "skipped": skipped,
                            "step_model": asdict(cost.step) if cost.step is not None else None})
    return 0


def _check_assistant(pair: str) -> None:
    """`--hf-assisted` needs a standalone draft LM as HF's assistant_model (`speed.references.standalone`): a pair whose
    draft is none is refused from its spec (a trained draft's kind from its checkpoint's metadata), before a load."""
    from spectree.drafts.draftspec import check_draft_file
    from spectree.models.pairs import check_pair_name

    draft = check_pair_name(pair).spec
    kind = check_draft_file(draft.checkpoint)["kind"] if draft.checkpoint else draft.kind
    if kind not in ("layerskip", "vdm", "hf"):
        what = ("a synthetic mix draft (the target's forwards inside it)" if kind == "mix"
                else f"an {kind.upper()} draft, which reads the target's hidden states")
        raise SpectreeError(f"--hf-assisted needs a standalone draft model (layerskip:, vdm: or hf:) as HF's "
                            f"assistant; pair {pair} has {what}: leave --hf-assisted out")


def cmd_lossless(args) -> int:
    from spectree.models.loading import load_pair
    from spectree.speed.bench import find_mismatches, run_strategies, summarize_runs

    policies = _policies(args.strategies)
    prompts = _checked_prompts(args, max(p.max_depth for p in policies.values()))
    models = load_pair(args.pair, kernels=args.kernels, **_placed(args))
    policies = _calibrated(policies, args.pair, models)
    skipped: dict[str, str] = {}
    runs = run_strategies(models, prompts, policies, args.max_new_tokens, warmup=False, skipped=skipped,
                          hf_packed=False, share_prefill=True)  # tokens, not time: one prefill per prompt
    for name, why in skipped.items():
        print(f"NOT CHECKED {name}: {why}")
    bad = find_mismatches(models, runs, prompts)
    table = summarize_runs(runs)
    print(table[["strategy", "tau", "gamma", "exact"]].to_string(index=False))
    for m in bad:
        verdict = f"near-tie ({str(models[0].dtype).removeprefix('torch.')} rounding)" if m.tie else "BUG"
        print(f"MISMATCH {m.strategy} {m.prompt}: first difference at {m.position} "
              f"(lengths {m.ref_len} vs {m.out_len}), AR top-2 logit gap {m.top2_gap:.2e} → {verdict}")
    n = len(prompts) * len(args.strategies)
    print(f"{n - len(bad)}/{n} generations match HF generate exactly; {len(bad)} mismatches "
          f"({sum(not m.tie for m in bad)} not explained by a near-tie)")
    _write_json(args.json, {"config": vars(args), "checked": n, "mismatches": [asdict(m) for m in bad],
                            "rows": table.to_dict(orient="records")})
    return 1 if bad or skipped else 0


def cmd_log(args) -> int:
    from spectree.replay.logbook import LogConfig, logbook_tag, write_logbook

    tree_shape = {f.name: getattr(args, f.name) for f in fields(LogConfig) if f.name not in ("pair", "max_new_tokens")}
    cfg = LogConfig(pair=args.pair, max_new_tokens=args.max_new_tokens, **tree_shape)
    raw = "-raw" if args.chat is False else ""  # --no-chat: raw-text prompts, logged apart from the template's
    name = check_name(args.name or logbook_tag(args.prompts) + raw, "logbook")
    prompts = _checked_prompts(args, cfg.d_max)
    out = write_logbook(prompts, cfg, name, **_placed(args))
    print(out)
    _write_json(args.json, {"logbook": str(out), "config": asdict(cfg)})
    return 0


def cmd_replay(args) -> int:
    import time

    import pandas as pd

    from spectree.replay.forest import Forest, tile
    from spectree.replay.logbook import read_logbook
    from spectree.replay.replay import replay, summarize

    policies = _policies(args.strategies)
    logbook = tile(read_logbook(args.logbook), args.min_trees)
    if any(p.needs_calibration for p in policies.values()):
        from spectree.speed.costmodel import cached_cost_model
        from spectree.speed.costmodel import calibrate

        from spectree.core.manifest import inside, read_manifest

        pair = json.loads((args.logbook / "config.json").read_text())["pair"]
        placed = {k: v for k, v in (read_manifest(inside(args.logbook)) or {}).items() if k in ("dtype", "device")}
        before = policies
        policies = calibrate(policies, lambda: cached_cost_model(pair, measure=False, kernels=("auto", "stock", "packed"),
                                                                 **placed)[0])
        for label, policy in policies.items():  # a model-free command: the cached cost model's one-token ratio
            if policy is not before[label]:
                print(f"{label}: s_d/s_t from the cached cost model's one-token forward ratio t_draft(1) / "
                      f"t_target(1) → {policy.spec} (bench measures EDD's mean over PCT's forwards)")
    t0 = time.perf_counter()
    forest = Forest.of(logbook)
    print(f"{forest.n_trees} logged trees ({len(logbook)} prompts), node table built in "
          f"{time.perf_counter() - t0:.2f} s")
    rows = []
    for spec, policy in policies.items():
        try:
            t0 = time.perf_counter()
            steps = replay(forest, policy)
            rows.append({"strategy": spec, **summarize(steps), "seconds": time.perf_counter() - t0})
        except SpectreeError as err:  # one policy outside the logged tree does not stop the others
            print(f"{spec}: not replayable on this logbook: {err}", file=sys.stderr)
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    _write_json(args.json, {"logbook": str(args.logbook), "rows": rows})
    return 0


def _tune_logbook(args, engine) -> tuple[Path, Optional[list]]:
    """The logbook `tune` replays: the one named (a folder, or a name under data/cache/logbooks), or (None, prompts)
    to log for --pair / --prompts, each checked before any model loads."""
    from spectree.core.paths import cache_dir

    if args.logbook:
        if args.pair or args.prompts:
            raise SpectreeError("--logbook names what to replay: leave out --pair and --prompts")
        path = Path(args.logbook)
        path = path if path.is_dir() else cache_dir() / "logbooks" / check_name(args.logbook, "logbook")
        if not (path / "config.json").exists():
            raise SpectreeError(f"--logbook {args.logbook}: no logbook there ({path}); log one with `python -m "
                                f"spectree log` or give --pair and --prompts")
        return path, None
    if not (args.pair and args.prompts):
        raise SpectreeError("give --logbook, or --pair and --prompts (logged first)")
    from spectree.tune import spread

    return None, spread(_checked_prompts(args, engine.log.d_max, "--positions"), args.max_prompts)


def _confirm_prompts(args, path: Optional[Path], prompts: Optional[list], engine) -> list:
    """`--confirm N`'s held-out prompts (`tune.held_out_prompts`), checked against the pair's target before any
    model loads; refused with `--cost-model` (the live run checks this machine's projection, not a file's)."""
    from spectree.models.pairs import check_pair_prompts
    from spectree.replay.logbook import LogConfig, read_logbook
    from spectree.tune import held_out_prompts

    if args.cost_model:
        raise SpectreeError("--confirm decodes on this machine and checks its own cost model: leave out --cost-model")
    logged = {p.key for p in prompts} if prompts is not None else {lp.prompt.key for lp in read_logbook(path)}
    pair = args.pair or LogConfig(**json.loads((path / "config.json").read_text())).pair  # a Pair, or the logbook's
    held = held_out_prompts(logged, args.confirm, args.confirm_prompts)
    check_pair_prompts(pair, held, args.max_new_tokens, engine.log.d_max, new_tokens="--positions")
    return held


def cmd_tune(args) -> int:
    from spectree.tune import check_engine, load_cost_model, run_tune

    engine = check_engine(args.engine)
    path, prompts = _tune_logbook(args, engine)
    given = load_cost_model(args.cost_model) if args.cost_model else None
    held = _confirm_prompts(args, path, prompts, engine) if args.confirm else None
    report = run_tune(engine, path, prompts, args.pair, args.prompts, args.max_new_tokens, _placed(args), given,
                      args.top, args.draft_model, args.token_map, args.draft_kind, held)
    _write_json(args.json, report)
    return 0


def cmd_acceptance(args) -> int:
    from spectree.analysis.acceptance import acceptance_table
    from spectree.models.pairs import check_pair_name

    draft = check_pair_name(args.pair).spec
    card = draft.checkpoint.with_suffix(".json") if draft.checkpoint else None
    if args.card and not card:
        raise SpectreeError(f"--card: pair {args.pair} has no trained draft card: a {draft.kind} draft has none "
                            f"(only edd:NAME and vdm:NAME drafts do)")
    if args.card and not card.exists():
        raise SpectreeError(f"--card: pair {args.pair} has no trained draft card ({card})")
    if args.card and draft.vocab is not None:
        raise SpectreeError(f"--card: the card holds the full-head draft's metrics; score {args.pair} without --card")
    if args.card:
        try:
            json.loads(card.read_text())
        except (OSError, ValueError) as err:
            fix = repair_hint(card, f"re-export it with `python -m spectree train --name {card.stem} --export`")
            raise SpectreeError(f"--card: {card} is not readable JSON ({err}); {fix}") from None
    prompts = _checked_prompts(args, args.depth)
    table, reports = acceptance_table([args.pair], prompts, args.max_new_tokens, args.depth, **_placed(args))
    if args.pair not in reports:
        raise SpectreeError(f"pair {args.pair} could not be loaded (see the warning above)")
    report = reports[args.pair]
    for name, rep in report["by_dataset"].items():
        print(f"{args.pair} {name}: top-1 by position {rep['top1_by_position']}, "
              f"chain-{args.depth} τ {rep['tau_chain']:.3f}")
    _write_json(args.json, {"pair": args.pair, **report})
    if args.card:
        held_out = f"{args.prompts}, {args.max_new_tokens} new tokens, target greedy output"
        metrics = {"held_out": held_out, **{k: v for k, v in report.items() if k != "tau_chain"},
                   f"tau_chain{args.depth}": round(report["tau_chain"], 3)}
        from spectree.drafts.storage import card_json

        atomic_write_text(card, card_json({**json.loads(card.read_text()), "metrics": metrics}))
        print(f"wrote the metrics into {card}")
    return 0


def cmd_train(args) -> int:
    import torch

    from spectree.models.pairs import load_target
    from spectree.training.export import export_checkpoint
    from spectree.training.training import TrainConfig, check_resume, device_name, train

    if args.block_min > args.block_max:
        raise SpectreeError(f"--block-min {args.block_min} must be <= --block-max {args.block_max}")
    cfg = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig)})
    if args.init_from is not None and not args.init_from.exists():
        raise SpectreeError(f"--init-from {args.init_from}: no such checkpoint")
    target_name = Path(args.target).name
    check_resume(args.name, cfg, target_name, restart=args.restart)  # name and settings, before the target loads
    if args.threads:
        torch.set_num_threads(args.threads)
    target, tok = load_target(args.target)
    work = train(args.name, cfg, target, tok, save_every_s=args.save_every, max_minutes=args.max_minutes,
                 init_from=args.init_from, init_step=args.init_step, target_name=target_name)
    print(work)
    if args.export:
        print(export_checkpoint(args.name, work, cfg, args.target, metrics={}, device=device_name(target),
                                precision=args.precision))
    return 0

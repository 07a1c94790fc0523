"""`python -m spectree {bench,lossless,log,replay}`. Every argument is validated before a model loads."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from dataclasses import asdict, fields
from pathlib import Path

from spectree.core.errors import SpectreeError
from spectree.core.paths import atomic_write_text, check_name, repair_hint

DEFAULT_STRATEGIES = ["chain:k=4", "kary:b=2,d=4"]


class _Parser(argparse.ArgumentParser):
    """argparse whose refusals read like every other one: one line `spectree: error: ...`, exit code 2."""

    def error(self, message: str):
        self.exit(2, f"spectree: error: {message}\n")


def _whole(minimum: int):
    """An argument type: a whole number >= minimum ('2.5', '1e9', 'inf', 'nan' are refused)."""
    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got '{text}'")
        return value
    return whole


def _number(low: float, high: float = float("inf"), closed: bool = False):
    """An argument type: a finite number above `low` (or equal to it when `closed`) and at most `high`."""
    def number(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not ((value >= low if closed else value > low) and value <= high and value < float("inf")):  # NaN fails
            bounds = f"{'>=' if closed else '>'} {low:g}" + (f" and <= {high:g}" if high < float("inf") else "")
            raise argparse.ArgumentTypeError(f"expected a number {bounds}, got '{text}'")
        return value
    return number


def _output_file(text: str) -> Path:
    """An argument type: a file this process can write (atomically: its nearest existing folder must be writable)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder: name a file, e.g. {path / 'results.json'}")
    folder = next(p for p in path.absolute().parents if p.exists())
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text}: {folder} is not a writable folder")
    return path


def _device(text: str) -> str:
    """An argument type: 'auto' or a torch device (cpu, cuda, cuda:N, mps)."""
    from spectree.drafts.targets import resolve_device

    try:
        return text if text == "auto" else resolve_device(text)
    except SpectreeError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _common(p: argparse.ArgumentParser, prompts: str, max_new: int) -> None:
    p.add_argument("--pair", default="smollm2-layerskip",
                   help="named target/draft pair (built-in or params/pairs.yaml), or TARGET+DRAFT: TARGET a registry "
                        "name, a model folder or a cached hub id; DRAFT layerskip:N, edd:NAME, vdm:NAME, hf:MODEL, "
                        "eagle:FOLDER")
    p.add_argument("--dtype", choices=("auto", "float32", "bfloat16", "float16"), default="auto",
                   help="precision of the pair (auto: bfloat16 on CUDA, float32 on CPU)")
    p.add_argument("--device", type=_device, default="auto",
                   help="auto (CUDA when present, a large target spread over every GPU), cpu, cuda, cuda:N")
    p.add_argument("--prompts", default=prompts, help="prompt spec, e.g. mtbench:8+humaneval:8")
    p.add_argument("--max-new-tokens", type=_whole(1), default=max_new)
    p.add_argument("--json", type=_output_file, help="also write the results here (atomically)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="spectree", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help="tokens/s and speedup vs HF generate, τ, γ per strategy")
    _common(b, "mtbench:16", 128)
    b.add_argument("--strategies", nargs="+", default=["ar"] + DEFAULT_STRATEGIES)
    b.add_argument("--temperature", type=_number(0, 10, closed=True), default=0.0, help="0: greedy")
    b.add_argument("--top-p", type=_number(0, 1), default=1.0)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--hf-assisted", action="store_true",
                   help="also time HF assisted generation with the pair's standalone draft (VDM, layer-skip)")
    b.add_argument("--hf-prompt-lookup", type=_whole(0), default=0, metavar="N",
                   help="also time HF prompt lookup decoding with N candidate tokens (needs no draft; 0: not)")
    b.add_argument("--repeats", type=_whole(1), default=1,
                   help="timed passes per prompt, interleaved (speedup: the median over passes, speedup_min beside)")
    ll = sub.add_parser("lossless", help="greedy exact match (lengths too) against HF generate")
    _common(ll, "mtbench:50+humaneval:50", 64)
    ll.add_argument("--strategies", nargs="+", default=DEFAULT_STRATEGIES)
    for p in (b, ll):
        p.add_argument("--kernels", choices=("auto", "packed", "stock"), default="auto",
                       help="our decoder's kernels: auto (prepacked oneDNN weights from the row count where they are "
                            "faster on this machine, in-place grouped attention), packed (always) or HF's stock ones; "
                            "the HF generate reference always runs stock")
    lg = sub.add_parser("log", help="write a logbook of full draft trees for replay")
    _common(lg, "mtbench:16", 128)
    from spectree.replay.logbook import LogConfig
    for f in fields(LogConfig):
        if f.name not in ("pair", "max_new_tokens"):
            lg.add_argument(f"--{f.name.replace('_', '-')}", type=_whole(1), default=f.default)
    lg.add_argument("--name", help="logbook name (default: the prompt spec)")
    tr = sub.add_parser("train", help="distil a one-layer draft (EDD / VDM) from the target; resumable")
    tr.add_argument("--name", required=True, help="checkpoint name, e.g. smollm2-edd")
    tr.add_argument("--target", default="smollm2-135m-instruct")
    from spectree.drafts.training import SAVE_EVERY_S, TrainConfig
    for f in fields(TrainConfig):
        tr.add_argument(f"--{f.name.replace('_', '-')}", default=f.default, **_train_type(f))
    tr.add_argument("--max-minutes", type=_number(0), help="stop (with a checkpoint) after this long")
    tr.add_argument("--threads", type=_whole(1), help="torch CPU threads")
    tr.add_argument("--save-every", type=_number(0, closed=True), default=SAVE_EVERY_S, metavar="SECONDS",
                    help="seconds between checkpoints, 0: every step (one is also saved on Ctrl-C)")
    tr.add_argument("--restart", action="store_true",
                    help="start over, discarding a saved state of this name (one made with other settings is refused)")
    tr.add_argument("--export", action="store_true", help="write data/drafts/<name>.safetensors + card when done")
    tr.add_argument("--init-from", type=Path, help="start from this shipped checkpoint when no saved state exists")
    tr.add_argument("--init-step", type=_whole(0), default=0, help="the step that checkpoint had reached")
    ac = sub.add_parser("acceptance", help="draft top-1 agreement by position and chain-k greedy τ")
    _common(ac, "mtbench:16+humaneval:16", 128)
    ac.add_argument("--depth", type=_whole(1), default=5)
    ac.add_argument("--card", action="store_true", help="also store the result as the held-out metrics in the draft's card")
    rp = sub.add_parser("replay", help="score strategies on a logbook without a model")
    rp.add_argument("logbook", type=Path)
    rp.add_argument("--strategies", nargs="+", default=["ar"] + DEFAULT_STRATEGIES)
    rp.add_argument("--min-trees", type=_whole(0), default=0,
                    help="repeat the logbook until it holds this many trees (to time replay at scale)")
    rp.add_argument("--json", type=_output_file)
    return parser


def _write_json(path: Path | None, payload: dict) -> None:
    if path:
        atomic_write_text(path, json.dumps(payload, indent=1, default=str))
        print(f"wrote {path}")


def _policies(specs: list[str]) -> dict:
    """{spec as typed: policy}: every strategy parsed (and refused, one line) before a model loads."""
    from spectree.strategies import parse_strategy

    return {s: parse_strategy(s) for s in specs}


def _checked_prompts(args, depth: int) -> list:
    """`--prompts`, each checked against `--pair`'s target with `--max-new-tokens` and trees `depth` deep (its
    tokenizer and config only: before any model loads); a bad pair is named before a bad prompt spec."""
    from spectree.drafts.pairs import check_pair_name, check_pair_prompts
    from spectree.prompts import parse_prompt_spec

    check_pair_name(args.pair)
    prompts = parse_prompt_spec(args.prompts)
    check_pair_prompts(args.pair, prompts, args.max_new_tokens, depth, new_tokens="--max-new-tokens")
    return prompts


def _placed(args) -> dict:
    """load_pair's dtype and device from `--dtype` / `--device`."""
    return {"dtype": args.dtype, "device": args.device}


def _calibrated(policies: dict, pair: str, models) -> dict:
    """PCT specs that name no ratio take s_d/s_t from the pair's cost model on this machine."""
    from spectree.speed.costmodel import calibrate, pair_cost_model

    out = calibrate(policies, lambda: pair_cost_model(pair, models))
    for label, policy in out.items():
        if policy is not policies[label]:
            print(f"{label}: measured s_d/s_t → {policy.spec}")
    return out


def cmd_bench(args) -> int:
    from spectree.core.sampling import Sampling
    from spectree.drafts.pairs import load_pair
    from spectree.speed.bench import format_table, run_strategies, summarize_runs

    policies = _policies(args.strategies)
    sampling = Sampling(args.temperature, args.top_p)
    prompts = _checked_prompts(args, max(p.max_depth for p in policies.values()))
    skipped: dict[str, str] = {}
    models = load_pair(args.pair, kernels=args.kernels, **_placed(args))
    policies = _calibrated(policies, args.pair, models)
    runs = run_strategies(models, prompts, policies, args.max_new_tokens, sampling, args.seed,
                          hf_assisted=args.hf_assisted, skipped=skipped, hf_lookup=args.hf_prompt_lookup,
                          repeats=args.repeats)
    table = summarize_runs(runs)  # no `exact` column for sampled runs (`Run.sampled`)
    print(f"pair={args.pair} prompts={args.prompts} ({len(prompts)}) max_new_tokens={args.max_new_tokens} "
          f"temperature={args.temperature} top_p={args.top_p} dtype={str(models[0].dtype).removeprefix('torch.')} "
          f"device={models[0].device}")
    print(format_table(table))
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    _write_json(args.json, {"config": vars(args), "rows": table.to_dict(orient="records"), "skipped": skipped})
    return 0


def cmd_lossless(args) -> int:
    from spectree.drafts.pairs import load_pair
    from spectree.speed.bench import find_mismatches, run_strategies, summarize_runs

    policies = _policies(args.strategies)
    prompts = _checked_prompts(args, max(p.max_depth for p in policies.values()))
    models = load_pair(args.pair, kernels=args.kernels, **_placed(args))
    policies = _calibrated(policies, args.pair, models)
    skipped: dict[str, str] = {}
    runs = run_strategies(models, prompts, policies, args.max_new_tokens, warmup=False, skipped=skipped,
                          hf_packed=False)
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
    name = check_name(args.name or logbook_tag(args.prompts), "logbook")
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
        policies = calibrate(policies, lambda: cached_cost_model(pair, measure=False, **placed)[0])
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


def cmd_acceptance(args) -> int:
    from spectree.analysis.acceptance import acceptance_table
    from spectree.drafts.pairs import check_pair_name, parse_draft

    draft = parse_draft(check_pair_name(args.pair).draft)
    card = draft.checkpoint.with_suffix(".json") if draft.checkpoint else None
    if args.card and not (card and card.exists()):
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
        atomic_write_text(card, json.dumps({**json.loads(card.read_text()), "metrics": metrics}, indent=1))
        print(f"wrote the metrics into {card}")
    return 0


def cmd_train(args) -> int:
    import torch

    from spectree.drafts.pairs import load_target
    from spectree.drafts.training import (
        TrainConfig,
        check_resume,
        device_name,
        export_checkpoint,
        train,
    )

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
        print(export_checkpoint(args.name, work, cfg, args.target, metrics={}, device=device_name(target)))
    return 0


def _train_type(f) -> dict:
    """How `train` reads a TrainConfig field, so that a bad value is refused naming the flag the user typed."""
    from spectree.drafts.training import DATA, KINDS, LOSSES

    choices = {"kind": KINDS, "loss": LOSSES, "data": DATA}
    if f.name in choices:
        return {"choices": choices[f.name]}
    if isinstance(f.default, bool):
        return {"type": _yes_no}
    if f.name in ("hidden_layer", "seed"):  # any whole number (hidden_layer -1: the default layer)
        return {"type": int}
    if isinstance(f.default, int):
        return {"type": _whole(1 if f.name.startswith("block_") else 0)}
    return {"type": _number(0, closed=f.name != "lr")}


def _yes_no(text: str) -> bool:
    if text.lower() not in ("yes", "no", "true", "false", "1", "0"):
        raise argparse.ArgumentTypeError(f"expected yes or no, got '{text}'")
    return text.lower() in ("yes", "true", "1")


COMMANDS = {"bench": cmd_bench, "lossless": cmd_lossless, "log": cmd_log, "replay": cmd_replay, "train": cmd_train,
            "acceptance": cmd_acceptance}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except SpectreeError as err:
        print(f"spectree: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM during training (which saved a checkpoint first)
        print("spectree: interrupted", file=sys.stderr)
        return 128 + getattr(err, "signum", signal.SIGINT)

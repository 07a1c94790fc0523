"""From a logbook to a serving engine's speculative settings: search the engine's knob grid by exact replay, rank
the settings by projected speedup under a cost model (this machine's, the GPU checklist's of a target shape, or a
t(n) curve of the user's), and write the chosen setting as the engine's own config text
(`policy.engine_config`: SGLang server flags, TensorRT-LLM YAML, vLLM JSON). `python -m spectree tune` is this.

Each engine's rule is a policy of `strategies.engines`; its grid here is the knob values worth trying, its default
the setting the engine would run unasked (or its documentation's example where it has none). A grid setting the
logbook cannot replay (a wider or deeper tree than logged) is left out, and said so.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import pandas as pd
from tqdm.auto import tqdm

from spectree.core.errors import SpectreeError
from spectree.core.paths import check_name
from spectree.core.policy import Policy
from spectree.replay.logbook import LogConfig
from spectree.replay.replay import as_forest
from spectree.pricing import price_replay
from spectree.strategies.engines import TRTLLM, SGLang, choices_of, uniform_trees

TOKENS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)  # verify budgets tried (SGLang: root included)
DEPTHS = tuple(range(1, 9))


def sglang_grid() -> list[Policy]:
    out = []
    for steps in DEPTHS:
        out.append(SGLang(steps=steps, topk=1, tokens=steps + 1))  # topk 1: SGLang's chain
        for topk in (2, 4, 8):
            cap = topk + (steps - 1) * topk * topk
            out += [SGLang(steps=steps, topk=topk, tokens=n) for n in TOKENS if n - 1 <= cap]
    return out


def trtllm_grid() -> list[Policy]:
    """Its dynamic trees, and static ones as `eagle_choices` (chains and trees of per-level branching factors)."""
    out: list[Policy] = []
    for layers in DEPTHS:
        for topk in (2, 4, 8, 10):
            out += [TRTLLM(layers=layers, topk=topk, tokens=n) for n in TOKENS if layers <= n <= topk * layers]
    return out + [choices_of(ws) for ws in uniform_trees()]


def vllm_grid() -> list[Policy]:
    """Chains of 1 to 8 tokens: vLLM verifies chains only (`strategies.engines`)."""
    return [choices_of((1,) * d) for d in DEPTHS]


@dataclass(frozen=True)
class Engine:
    name: str
    grid: Callable[[], list[Policy]]
    default: Policy  # what the engine runs unasked, or its documentation's example
    default_is: str  # where that default comes from
    log: LogConfig  # a logbook that replays (almost all of) the grid: an engine expands the top-k of ITS candidates,
    # which a logbook's beam (the top by joint of all its candidates) covers only when wider, hence 4·K


ENGINES = {
    "sglang": Engine("sglang", sglang_grid, SGLang(), "SGLang's automatic choice for a Llama target (speculative_hook.py)",
                     LogConfig(K=8, d_max=8, beam=64, b_env=2, d_env=4)),
    "trtllm": Engine("trtllm", trtllm_grid, TRTLLM(), "TensorRT-LLM's documented dynamic-tree example "
                     "(docs/source/features/speculative-decoding.md); it has no default tree",
                     LogConfig(K=10, d_max=8, beam=80, b_env=4, d_env=3)),
    "vllm": Engine("vllm", vllm_grid, choices_of((1, 1)), "vLLM's documented EAGLE example: 2 speculative tokens "
                   "(docs/features/speculative_decoding/eagle.md); it has no default",
                   LogConfig(K=2, d_max=8, beam=1, b_env=1, d_env=1)),  # chains: the rank-0 chain is always logged
}


def check_engine(name: str) -> Engine:
    if name not in ENGINES:
        raise SpectreeError(f"unknown engine '{name}': use one of {sorted(ENGINES)}")
    return ENGINES[name]


# --- cost models ---------------------------------------------------------------------------------------------

def load_cost_model(spec: str):
    """A cost model from a file: the GPU checklist's costmodel.json with ':SHAPE[:REGIME]' (its largest shape if none;
    regime "eager", the papers' eager PyTorch, unless "graphs", the engines' CUDA graphs), or a JSON object
    {"sizes": [...], "target_s": [...], "draft_s": [...]} (seconds of one forward over n tree tokens: a t(n) curve
    of your own). Returns (CostModel, description); one line on a bad file."""
    from spectree.projection import REGIME_WORDS, gpu_cost_models
    from spectree.speed.costmodel import CostModel

    path, _, rest = spec.partition(":") if not Path(spec).exists() else (spec, "", "")
    shape, _, regime = rest.partition(":")
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise SpectreeError(f"--cost-model {spec}: not a readable JSON file ({err})") from None
    if isinstance(data, dict) and "shapes" in data:
        costs, device = gpu_cost_models(path)
        shape, regime = shape or list(data["shapes"])[-1], regime or "eager"
        if (shape, regime) not in costs:
            have = ", ".join(f"{s}:{r}" for s, r in costs)
            raise SpectreeError(f"--cost-model {spec}: no shape '{shape}' in regime '{regime}' in {path} "
                                f"(it has {have})")
        return costs[shape, regime], f"{device}, {shape}-shaped target, {REGIME_WORDS[regime]} ({path})"
    keys = ("sizes", "target_s", "draft_s")
    if not (isinstance(data, dict) and all(isinstance(data.get(k), list) and data[k] for k in keys)
            and len({len(data[k]) for k in keys}) == 1 and 1 in data["sizes"]
            and all(isinstance(x, (int, float)) and x > 0 for k in keys for x in data[k])):
        raise SpectreeError(f"--cost-model {spec}: expected the GPU checklist's costmodel.json or "
                            f'{{"sizes": [1, ...], "target_s": [...], "draft_s": [...]}} (seconds > 0, equal lengths)')
    return CostModel(machine=str(path), prefix=int(data.get("prefix", 0)), sizes=list(data["sizes"]),
                     target_s=list(data["target_s"]), draft_s=list(data["draft_s"]), step=data.get("step")), \
        f"the t(n) curve of {path}" + ("" if data.get("step") else " (no step model: the forwards alone)")


# --- the search ----------------------------------------------------------------------------------------------

def tune(source, engine: Engine, cost, progress: bool = True) -> tuple[pd.DataFrame, dict[str, str]]:
    """Every grid setting (and the default) replayed on the logbook (`source`: a Forest or LoggedPrompts) and
    priced by `cost`: one row each (spec, τ, γ, projected speedup over plain decoding, default), fastest first;
    and {spec: why} of the settings the logbook cannot replay."""
    forest = as_forest(source)
    settings = {p.spec: p for p in [engine.default, *engine.grid()]}
    rows, skipped = [], {}
    for spec, policy in tqdm(settings.items(), desc=f"tune {engine.name}", unit="setting", disable=not progress):
        try:
            s = price_replay(forest, policy, cost)
        except SpectreeError as err:
            skipped[spec] = str(err)
            continue
        rows.append({"spec": spec, "tau": s["tau"], "gamma": s["gamma"], "speedup": s["speedup"],
                     "default": spec == engine.default.spec})
    table = pd.DataFrame(rows, columns=["spec", "tau", "gamma", "speedup", "default"])
    return table.sort_values("speedup", ascending=False, kind="stable").reset_index(drop=True), skipped


def per_prompt(logbook: list, policies: dict[str, Policy], cost) -> pd.DataFrame:
    """One row per (prompt, label): the replayed tokens (Σ τ) and the projected seconds of plain decoding and of the
    policy's steps on that prompt's trees, so that a comparison pools and resamples prompts."""
    rows = []
    for lp in logbook:
        forest = as_forest([lp])
        for label, policy in policies.items():
            s = price_replay(forest, policy, cost)
            rows.append({"prompt": lp.prompt.key, "label": label, "tokens": s["tokens"],
                         "seconds": s["step_ms"] * s["steps"] / 1000, "plain_seconds": s["plain_s"]})
    return pd.DataFrame(rows)


def spread(prompts: list, n: int) -> list:
    """At most n prompts, evenly spaced over the list (so a question file's every category is drawn), in order."""
    if len(prompts) <= n:
        return list(prompts)
    return [prompts[(i * len(prompts)) // n] for i in range(n)]


def split(logbook: list, fraction: float) -> tuple[list, list]:
    """(the first `fraction` of each prompt set's logged prompts, the rest): choose a setting on the first part and
    judge it on prompts it was not chosen on."""
    fit, judge = [], []
    for dataset in dict.fromkeys(lp.prompt.dataset for lp in logbook):
        part = [lp for lp in logbook if lp.prompt.dataset == dataset]
        n = int(round(fraction * len(part)))
        fit += part[:n]
        judge += part[n:]
    if not fit or not judge:
        raise SpectreeError(f"tuning on {fraction:.0%} of each prompt set leaves one side empty: log more prompts")
    return fit, judge


def held_out_claim(rows: pd.DataFrame, tuned: str, default: str, engine: str, where: str,
                   bar: float = 1.10) -> dict[str, Any]:
    """"tuned settings beat the engine's default by ≥ 10% projected speedup", on prompts the tuning did not see:
    the pooled projected tokens/s of the tuned setting over the default's, 95% paired bootstrap over the prompts
    (at least `claims.MIN_PROMPTS` of them). A bar of ours (kind "bar"): no paper states it, and the papers' claims
    are counted apart."""
    from spectree.claims.claims import bootstrap_rule, claim, pooled_quotient
    from spectree.claims.verdicts import BAR

    a = rows[rows.label == "tuned"].set_index("prompt")
    b = rows[rows.label == "default"].set_index("prompt").loc[a.index]
    evidence = bootstrap_rule([a.tokens, a.seconds, b.tokens, b.seconds], pooled_quotient, bar,
                              f"projected tokens/s of {tuned} ÷ {default}'s")
    gain = a.tokens.sum() / a.seconds.sum() / (b.tokens.sum() / b.seconds.sum())
    ours = (f"{tuned} vs {default}: {gain:.2f}×" if tuned != default else
            f"the tuning found no setting above the default ({default}) on the prompts it tuned on: no gain to read")
    return claim(f"{engine}: tuned settings beat the engine's default by ≥ {bar - 1:.0%} projected speedup ({where})",
                 "—", ours, evidence, goal=f"≥ {bar:g}× the default's (ours)", kind=BAR, prompts=list(a.index))


def summary_lines(table: pd.DataFrame, engine: Engine, top: int = 5) -> list[str]:
    """The top settings and the engine's default, aligned: rank, spec, τ, γ, projected speedup."""
    default = table[table.default]
    shown = pd.concat([table.head(top), default[default.index >= top]])
    lines = [f"{'rank':>4}  {'setting':<46}{'τ':>6}{'γ':>7}{'projected':>11}"]
    for i, r in shown.iterrows():
        mark = "  ← the engine's default" if r.default else ""
        lines.append(f"{i + 1:>4}  {r.spec:<46}{r.tau:>6.2f}{r.gamma:>7.1f}{r.speedup:>10.2f}×{mark}")
    if default.empty:
        lines.append(f"      the engine's default ({engine.default.spec}) is not replayable on this logbook")
    return lines


def gain_over_default(table: pd.DataFrame) -> float:
    """The best setting's projected speedup over the default's, minus 1 (NaN without a default row)."""
    default = table[table.default]
    return float(table.speedup.iloc[0] / default.speedup.iloc[0] - 1) if len(default) else math.nan


def write_token_map(pair: str, path: Path) -> Path:
    """SGLang's --speculative-token-map file for a pair whose draft has a reduced head (NAME@V): the V kept target
    token ids, most frequent first, as a 1-D int64 tensor saved with torch.save (SGLang reads it with
    torch.load(weights_only=True), spec_utils.load_token_map)."""
    import torch

    from spectree.core.paths import atomic_write_bytes
    from spectree.drafts.draftspec import draft_vocab
    from spectree.models.pairs import check_pair_name

    draft = check_pair_name(pair).draft
    ids = draft_vocab(draft)
    if ids is None:
        raise SpectreeError(f"--token-map: pair {pair}'s draft has its full head; name a reduced one, e.g. "
                            f"edd:smollm2-edd@8192")
    import io

    buffer = io.BytesIO()
    torch.save(ids.to(torch.int64).contiguous(), buffer)
    atomic_write_bytes(path, buffer.getvalue())
    return path


# --- --confirm: the best setting and the default decoded live ------------------------------------------------

def held_out_prompts(logged: set[str], n: int, spec: Optional[str] = None) -> list:
    """n prompts the logbook did not log (by key), evenly spread: from `spec`, else from the logged prompts' own
    built-in prompt sets (a prompt file's are not known by name: give `spec`). One line when there are none."""
    from spectree.prompts import DATASETS, load_prompts, parse_prompt_spec

    if spec is None:
        sets = sorted({key.partition("/")[0] for key in logged})
        foreign = [d for d in sets if d not in DATASETS]
        if foreign:
            raise SpectreeError(f"--confirm: the logbook's prompts come from {foreign[0]}, not a built-in set: name "
                                f"held-out prompts with --confirm-prompts SPEC")
        pool = [p for d in sets for p in load_prompts(d)]
    else:
        pool = parse_prompt_spec(spec)
    fresh = [p for p in pool if p.key not in logged]
    if not fresh:
        raise SpectreeError(f"--confirm: every prompt of {spec or ', '.join(sets)} is in the logbook: name others "
                            f"with --confirm-prompts SPEC")
    return spread(fresh, n)


def confirm(models, policies: dict[str, Policy], projected: dict[str, float], prompts: list, max_new_tokens: int,
            cost) -> pd.DataFrame:
    """Each labelled setting decoded live on `prompts` beside plain decoding through our loop (`bench`, greedy), one
    row each: its `projected` speedup (the ranking's, replayed on the logbook), `projected_live` (the step model on
    this run's own steps) and `measured`, all over our AR loop on this machine, with τ and γ."""
    from spectree.speed.bench import run_strategies, summarize_runs
    from spectree.strategies.chain import autoregressive

    ar = "AR (our loop)"
    live = summarize_runs(run_strategies(models, prompts, {ar: autoregressive(), **policies}, max_new_tokens,
                                         cost=cost)).set_index("strategy")
    return pd.DataFrame([{"setting": label, "spec": policy.spec, "projected": projected[label],
                          "projected_live": live.projected[label] / live.projected[ar],
                          "measured": live.tokens_per_s[label] / live.tokens_per_s[ar],
                          "tau": live.tau[label], "gamma": live.gamma[label]} for label, policy in policies.items()])


def confirm_engines(models, chosen: dict[str, tuple[Policy, float, float]], prompts: list, max_new_tokens: int,
                    cost) -> pd.DataFrame:
    """`confirm` for several engines at once (notebook 13): `chosen` maps an engine's name to (its best setting, that
    setting's projected speedup, the default's); one row per engine and setting, `engine` first."""
    frames = []
    for name, (tuned, projected, default_projected) in chosen.items():
        engine = check_engine(name)
        policies = {"best": tuned, **({"default": engine.default} if tuned.spec != engine.default.spec else {})}
        frames.append(confirm(models, policies, {"best": projected, "default": default_projected}, prompts,
                              max_new_tokens, cost).assign(engine=name))
    out = pd.concat(frames, ignore_index=True)
    return out[["engine", *[c for c in out.columns if c != "engine"]]]


def confirm_lines(rows: pd.DataFrame, n_prompts: int) -> list[str]:
    out = [f"live on {n_prompts} held-out prompts, speedup over our AR loop on this machine:",
           f"{'setting':<9}{'spec':<42}{'projected':>10}{'live trees':>11}{'measured':>10}{'τ':>6}"]
    def x(value: float, width: int) -> str:  # the default's projection is absent where the logbook cannot replay it
        return f"{value:>{width - 1}.2f}×" if value == value else f"{'—':>{width}}"
    return out + [f"{r.setting:<9}{r.spec:<42}{x(r.projected, 10)}{x(r.projected_live, 11)}{x(r.measured, 10)}"
                  f"{r.tau:>6.2f}" for r in rows.itertuples()]


def tune_report(table: pd.DataFrame, skipped: dict[str, str], engine: Engine, origin: str,
                top: int = 5) -> dict[str, Any]:
    """What `tune --json` writes: the ranked rows, the skipped settings, the default and the best."""
    return {"engine": engine.name, "cost_model": origin, "rows": table.to_dict(orient="records"),
            "skipped": skipped, "default": engine.default.spec, "default_is": engine.default_is,
            "best": table.spec.iloc[0] if len(table) else None, "gain_over_default": gain_over_default(table)}


def run_tune(engine: Engine, path: Optional[Path], prompts: Optional[list], pair: Optional[str],
             prompt_spec: Optional[str], max_new_tokens: int, placed: dict, given, top: int,
             draft_model: Optional[str], token_map: Optional[Path], draft_kind: str = "eagle",
             confirm_on: Optional[list] = None) -> dict[str, Any]:
    """`python -m spectree tune` once its arguments are checked (`cli.cmd_tune`): the logbook at `path`, or the
    `prompts` logged first for `pair`; the cost model `given` (CostModel, origin) or the pair's on this machine; the
    ranked settings and the best as the engine's config text (for a `draft_kind` draft) printed; the token map
    written; with `confirm_on` (held-out prompts), the best setting and the default decoded live on them
    (`confirm`). Returns the report."""
    from dataclasses import replace

    from spectree.replay.logbook import logbook_tag, read_logbook, write_logbook
    from spectree.strategies import parse_strategy
    from spectree.strategies.engines import DRAFT

    pair = pair or LogConfig(**json.loads((path / "config.json").read_text())).pair
    if token_map:
        from spectree.drafts.draftspec import draft_vocab
        from spectree.models.pairs import check_pair_name

        if draft_vocab(check_pair_name(pair).draft) is None:  # a Pair from the command line: checked once
            raise SpectreeError(f"--token-map: pair {pair}'s draft has its full head; name a reduced one, e.g. "
                                f"smollm2-135m-instruct+edd:smollm2-edd@8192")
    if path is None:
        cfg = replace(engine.log, pair=str(pair), max_new_tokens=max_new_tokens)  # a config holds the name
        name = check_name(f"tune-{engine.name}-{logbook_tag(prompt_spec)}-{len(prompts)}", "logbook")
        print(f"logging {len(prompts)} prompts × {max_new_tokens} tokens for {engine.name}'s grid "
              f"(K={cfg.K}, d_max={cfg.d_max}, beam={cfg.beam}) into {name}")
        path = write_logbook(prompts, cfg, name, rebuild=True, **placed)
    logbook = read_logbook(path)
    if given is None:
        from spectree.speed.costmodel import cached_cost_model

        cost, origin = cached_cost_model(pair, kernels=("auto", "stock", "packed"),
                                         **{k: v for k, v in placed.items() if v != "auto"})
        origin = f"this machine's, {origin}"
    else:
        cost, origin = given
    table, skipped = tune(logbook, engine, cost)
    if table.empty:
        raise SpectreeError(f"no {engine.name} setting replays on {path}: log with larger --K / --d-max")
    print(f"{engine.name} on {path.name} ({len(logbook)} prompts, pair {pair}); cost model: {origin}")
    print("\n".join(summary_lines(table, engine, top)))
    if skipped:
        print(f"({len(skipped)} settings not replayable on this logbook, e.g. {next(iter(skipped))})")
    written = str(write_token_map(pair, token_map)) if token_map else ""
    best = parse_strategy(table.spec.iloc[0])
    print(f"\nthe best setting as {engine.name} takes it:\n" + best.engine_config(engine.name, draft_model or DRAFT,
                                                                                    written, draft_kind))
    if written:
        print(f"wrote the token map {written}")
    report = {**tune_report(table, skipped, engine, origin), "logbook": str(path), "pair": pair}
    if confirm_on:
        from spectree.models.loading import load_pair
        from spectree.speed.costmodel import pair_cost_model

        models = load_pair(pair, kernels="auto", **placed)
        projected = table.set_index("spec").speedup
        chosen = {engine.name: (best, float(projected[best.spec]), float(projected.get(engine.default.spec, math.nan)))}
        rows = confirm_engines(models, chosen, confirm_on, max_new_tokens, pair_cost_model(pair, models)).drop(
            columns="engine")
        print("\n" + "\n".join(confirm_lines(rows, len(confirm_on))))
        report["confirm"] = {"prompts": [p.key for p in confirm_on], "rows": rows.to_dict("records")}
    return report


__all__ = ["ENGINES", "Engine", "check_engine", "load_cost_model", "tune", "spread", "split", "per_prompt", "held_out_claim",
           "summary_lines", "held_out_prompts", "confirm", "confirm_engines", "confirm_lines",
           "gain_over_default", "write_token_map", "tune_report", "run_tune", "sglang_grid", "trtllm_grid", "vllm_grid"]

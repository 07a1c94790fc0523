"""The five-minute tour: `python -m spectree strategies` (every strategy spec, its knobs and defaults, its paper; no
model) and `python -m spectree try "PROMPT"` (one prompt decoded by HF generate and by one tree policy: the text, τ,
γ, tokens/s, the speedup and whether the two outputs are identical)."""
from __future__ import annotations

import inspect
import math
import re
from dataclasses import MISSING

from spectree.core.errors import SpectreeError

TRY_PAIR = "smollm2-edd"  # the shipped trained EDD draft, the README's pair
TRY_STRATEGY = "dyspec:m=4,K=4,d_max=4"  # the fastest tree of RESULTS.md's speed table at T = 0 on this pair ("DySpec m=4")


ROLES = {"K": "children offered per node", "d_max": "depth"}  # the two every policy has (`core.policy.Policy`)


def knobs(factory) -> list[tuple[str, object, str]]:
    """(name, default, what it means) of each spec parameter of a registered strategy or retrieval proposer, read
    from its dataclass fields (or its function's signature); the meaning is the field's trailing comment, else the
    role it plays for the policy (K or d_max, under its own name where `Policy.param_names` renames it)."""
    from spectree.core.policy import spec_fields

    if not inspect.isclass(factory):
        return [(k, p.default, "") for k, p in inspect.signature(factory).parameters.items()]
    renamed = getattr(factory, "param_names", {})
    roles = {renamed.get(role, role): text + (f" ({role})" if role in renamed else "") for role, text in ROLES.items()}
    out = []
    for f in spec_fields(factory):
        default = f.default if f.default is not MISSING else f.default_factory()
        out.append((f.name, default, _field_comment(factory, f.name) or roles.get(f.name, "")))
    return out


def _field_comment(cls, name: str) -> str:
    """The trailing `# comment` of field `name` where the class (or the nearest base declaring it) declares it."""
    line = re.compile(rf"^\s+{re.escape(name)}\s*:[^#\n]*#\s*(.+)$", re.M)
    for klass in cls.__mro__:
        if name in vars(klass).get("__annotations__", {}):
            try:
                found = line.search(inspect.getsource(klass))
            except (OSError, TypeError):
                return ""
            return found.group(1).strip() if found else ""
    return ""


def _value(value) -> str:
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return "unset" if value is None or value == "" else str(value)


def strategy_rows() -> list[dict]:
    """One row per registered strategy, then per retrieval proposer: name, the spec with every default spelled out,
    its knobs (name, default, meaning), its paper, the first sentence of its docstring."""
    from spectree.retrieval.proposers import RETRIEVERS
    from spectree.strategies import PAPERS, REGISTRY

    rows = []
    for kind, registry in (("strategy", REGISTRY), ("retrieval", RETRIEVERS)):
        for name, factory in registry.items():
            params = knobs(factory)
            spelled = [f"{k}={_value(v)}" for k, v, _ in params if v not in (None, "")]
            spec = name + (":" + ",".join(spelled) if spelled else "")
            doc = " ".join((inspect.getdoc(factory) or "").split())
            rows.append({"name": name, "kind": kind, "spec": spec, "knobs": params,
                         "paper": PAPERS.get(name, "?"), "about": doc.split(". ")[0].rstrip(".")})
    return rows


def cmd_strategies(args) -> int:
    rows = strategy_rows()
    print("strategy specs: NAME[:key=value,...], every key optional (its default below); retrieval proposers join any "
          "spec with '+', e.g. pct:ratio=0.2+lookup:len=10 or ar+suffix:k=2")
    for kind, title in (("strategy", "tree policies"), ("retrieval", "retrieval proposers (after '+')")):
        print(f"\n{title}:")
        for row in (r for r in rows if r["kind"] == kind):
            print(f"  {row['spec']}\n      paper: {row['paper']}")
            if args.verbose:
                print(f"      {row['about']}")
            shown = [f"{key}={_value(default)}" for key, default, _ in row["knobs"]]
            width = max(map(len, shown), default=0)
            for text, (_, _, meaning) in zip(shown, row["knobs"]):
                print(f"      {text:<{width}}  {meaning}".rstrip())
    return 0


def cmd_try(args) -> int:
    from spectree.cli.commands import _calibrated, _placed, _policies
    from spectree.models.loading import load_pair
    from spectree.models.pairs import check_pair_name, check_pair_prompts
    from spectree.prompts import Prompt
    from spectree.speed.bench import run_strategies, summarize_runs
    from spectree.speed.references import HF

    if not args.prompt.strip():
        raise SpectreeError('the prompt is empty: give the text to decode, e.g. python -m spectree try '
                            '"Write a haiku about trees"')
    policies = _policies([args.strategy])
    prompt = Prompt("try", "0", "try", args.prompt)
    args.pair = check_pair_name(args.pair)
    check_pair_prompts(args.pair, [prompt], args.max_new_tokens, policies[args.strategy].max_depth,
                       new_tokens="--max-new-tokens")
    print(f"loading {args.pair} ...", flush=True)
    models = load_pair(args.pair, kernels=args.kernels, **_placed(args))
    policies = _calibrated(policies, args.pair, models)
    skipped: dict[str, str] = {}
    runs = run_strategies(models, [prompt], policies, args.max_new_tokens, repeats=args.repeats, hf_packed=False,
                          skipped=skipped)
    if skipped:  # its trees outgrew `Policy.max_nodes`
        raise SpectreeError(f"{args.strategy}: {skipped[args.strategy]}")
    table = summarize_runs(runs).set_index("strategy")
    hf, ours = table.loc[HF], table.loc[args.strategy]
    mine = next(r for r in runs if r.strategy == args.strategy)
    identical = bool(ours.exact == 1.0)
    print(f"\n{models[2].decode(mine.tokens, skip_special_tokens=True).strip()}\n")
    print(f"pair {args.pair}, strategy {args.strategy}, greedy, {int(ours.tokens / args.repeats)} new tokens")
    print(f"HF generate:  {hf.tokens_per_s:6.1f} tokens/s")
    synthetic = math.isnan(ours.speedup)  # `Run.synthetic`: a mix draft runs the target inside it
    print("tree policy:  " + ("" if synthetic else f"{ours.tokens_per_s:6.1f} tokens/s, ")
          + f"τ = {ours.tau:.2f} tokens per target forward, γ = {ours.gamma:.1f} draft tokens verified per forward")
    if synthetic:
        print("speedup vs HF generate: not measured (a synthetic mix draft: τ and γ only)")
    else:
        print(f"speedup vs HF generate: {ours.speedup:.2f}×")
    print(f"identical to HF generate: {identical}")
    return 0 if identical else 1

"""Compare two runs' `figures/<notebook>/summary.json` (say a quick profile before and after a refactor) and print
every difference that is not a measured time or a record of when and where a run happened.

    python scripts/compare_summaries.py BEFORE/figures AFTER/figures [--notebooks 00_quickstart ...]

Keys ignored at any depth, with everything under them:
- measured in time, so they differ between any two runs of one commit: `seconds`, names ending in `_s` or `_ms` or
  starting with `ms_` (forward times, step and draw times), `tokens_per_s`, every speedup (`speedup*`,
  `cpu_speedup`, `over_ar`, `time_saved_pct`), the time split of a step (`*_frac`, `*_share`), the other processes'
  load while timing (`other_cores`), timed rounds (`*_rounds`), `timing_ms`, cost and step models and their
  projections (`cost_model`, `gpu_cost_model`, `projected`, `target_s`, `draft_s`, keys naming a step model, a
  projection, "best projected" or "needs agreement", `forward_cost*`), and s_d/s_t measured on this machine (keys
  naming "measured", "this machine", "one-token forward ratio" or "s_d/s_t measurements");
- provenance: `commit`, `date`, `host`, `machine`, `device`, `torch`, `transformers`, `threads`, `run`, `timing`,
  `command`.
Everything else must be equal: numbers exactly (floats within 1e-9, relative), strings, lists element by element,
dicts key by key. Three kinds of difference are printed but labelled "timing-dependent", since two runs of one commit
may differ there too: inside a claim whose rule reads timings (its `rule`, `claim` or `key` names tokens/s, time, a
step's share, projected or live speed, timed rounds, ms or speed), inside a table of live decoding (a key naming
"live": PCT there takes the s_d/s_t measured on this machine, so its trees, τ and γ follow the timings), and a
notebook's verdict tallies (`claims_tally`, `paper_claims`, `our_bars`) when its timing-dependent claims differ.
Exit status 1 when any other difference is found, 0 otherwise.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any, Iterator

IGNORED = {"seconds", "tokens_per_s", "cpu_speedup", "over_ar", "time_saved_pct", "other_cores", "timing_ms",
           "cost_model", "gpu_cost_model", "projected", "target_s", "draft_s", "commit", "date", "host", "machine",
           "device", "torch", "transformers", "threads", "run", "timing", "command"}
IGNORED_PATTERN = re.compile(r"(_s|_ms|_frac|_share|_rounds)$|^ms_|^speedup|step model|projected|projection|"
                             r"needs agreement|measured|this machine|one-token forward ratio|s_d/s_t measurements|"
                             r"^forward_cost")
TIMING_CLAIM = re.compile(r"speed|faster|slower|time|tokens/s|share|projected|live|rounds|\bms\b|wall",
                          re.IGNORECASE)
TALLIES = {"claims_tally", "paper_claims", "our_bars"}


def ignored(key: str) -> bool:
    return key in IGNORED or bool(IGNORED_PATTERN.search(key))


def is_timing_claim(node: dict) -> bool:
    return any(isinstance(node.get(k), str) and TIMING_CLAIM.search(node[k]) for k in ("rule", "claim", "key"))


def differences(a: Any, b: Any, path: str = "", timing: bool = False) -> Iterator[tuple[str, Any, Any, bool]]:
    """(path, before, after, inside a timing claim) of every difference below `path`."""
    if isinstance(a, dict) and isinstance(b, dict):
        timing = timing or is_timing_claim(a) or is_timing_claim(b)
        for key in sorted(set(a) | set(b), key=str):
            if ignored(str(key)):
                continue
            where, live = f"{path}/{key}", timing or "live" in str(key)
            if key not in a or key not in b:
                yield where, a.get(key, "<absent>"), b.get(key, "<absent>"), live
            else:
                yield from differences(a[key], b[key], where, live)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield f"{path} (length)", len(a), len(b), timing
        for i, (x, y) in enumerate(zip(a, b)):
            yield from differences(x, y, f"{path}[{i}]", timing)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        if not (a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)):
            yield path, a, b, timing
    elif a != b:
        yield path, a, b, timing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="figures/ folder of the first run")
    parser.add_argument("after", type=Path, help="figures/ folder of the second run")
    parser.add_argument("--notebooks", nargs="*", help="notebook names to compare (default: every summary in either)")
    args = parser.parse_args(argv)
    names = args.notebooks or sorted({p.parent.name for d in (args.before, args.after) for p in d.glob("*/summary.json")})
    failing = 0
    for name in names:
        paths = [d / name / "summary.json" for d in (args.before, args.after)]
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            print(f"{name}: missing {', '.join(missing)}")
            failing += 1
            continue
        found = list(differences(*(json.loads(p.read_text()) for p in paths)))
        if any(timing for *_, timing in found):  # the tallies count the timing-dependent verdicts too
            found = [(w, x, y, timing or w.split("/")[1] in TALLIES) for w, x, y, timing in found]
        other = [d for d in found if not d[3]]
        failing += bool(other)
        print(f"{name}: " + ("equal" if not found else f"{len(other)} difference(s), {len(found) - len(other)} "
                                                        f"timing-dependent"))
        for where, x, y, timing in found:
            print(f"  {'timing-dependent ' if timing else ''}{where}: {json.dumps(x)[:160]} → {json.dumps(y)[:160]}")
    print(f"{len(names)} notebooks compared, {failing} with differences that are not timings")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())

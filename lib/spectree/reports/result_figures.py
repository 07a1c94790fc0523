"""The figures of RESULTS.md: for every paper figure a notebook reproduces, the notebook's own PNG shown under its
section with a one-line caption — what the paper's figure shows (from its text) and what ours shows (computed from
the notebook's summary.json, never typed).

`REGISTRY` is the one list of them: notebook, the figure's stem (as the notebook's `save_figure` names it; `*`
stands for a parameter, e.g. `speedup_T*` for each temperature), the paper's figure, its reading and how ours is
read off the summary (`claims`: the `ours` and verdict of the claims whose names hold a key; or a function of the
summary). The run that writes the repository's RESULTS.md (`results.write_results`) also writes one small copy of
each (`compact_png`: at most `WIDTH` px wide, `WIDE` for wide panels, palette-quantised, ≤ MAX_BYTES each and
≤ TOTAL_BYTES together) into the tracked folder figures/results/, so the repository holds every picture its
RESULTS.md shows and they always match its numbers; figures/RESULTS.md shows the notebooks' own files. A figure a
run did not produce is one line saying so.
"""
from __future__ import annotations

import ast
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from spectree.claims.text import verdict_text
from spectree.core.paths import atomic_write_bytes, figures_dir

RESULTS_DIR = "results"  # figures/results/: the repository's copies (tracked; .gitignore un-ignores it)
WIDTH, WIDE, WIDE_ASPECT = 1000, 1600, 1.8  # px; a figure at least WIDE_ASPECT times wider than tall is "wide"
MAX_BYTES, TOTAL_BYTES = 150_000, 4_000_000  # each copy, all of them together
SHOWN_CLAIMS, SHOWN_CHARS = 3, 240  # claims read into one caption, characters of one claim's `ours`
MISSING = "not in this run's summary.json"
Ours = Callable[[dict[str, Any], str], str]  # (summary, the part `*` matched) -> what ours shows


@dataclass(frozen=True)
class ResultFigure:
    notebook: str  # stem, e.g. "04_entropy_rank"
    stem: str  # the figure's name as the notebook saves it (figures/<notebook>/<stem>.png); `*` for a parameter
    paper: str  # the paper's figure, e.g. "C2T Fig. 2"; "—" for a figure of ours that no paper has
    says: str  # what the paper's figure shows, from its text
    ours: Ours


def _short(text: str) -> str:
    """A claim's `ours` cut at a '; ' before SHOWN_CHARS characters (the claims table below has it whole)."""
    text = " ".join(str(text).split())
    if len(text) <= SHOWN_CHARS:
        return text
    cut = text.rfind("; ", 0, SHOWN_CHARS)
    return text[:cut if cut > 0 else SHOWN_CHARS] + " …"


def claims(*keys: str, limit: int = SHOWN_CLAIMS) -> Ours:
    """Ours as the claims whose names contain one of `keys` ("{T}" in a key: the temperature `*` matched, as
    "0" or "0.6"), in the summary's order: each one's name (tagged where it is our bar or a reading off the paper's
    point, `_tag`), `ours` and verdict."""
    def read(summary: dict[str, Any], part: str) -> str:
        temp = f"{float(part):g}" if re.fullmatch(r"\d+(\.\d+)?", part) else part
        wanted = [k.replace("{T}", temp) for k in keys]
        found = [c for c in summary.get("claims") or [] if isinstance(c, dict)
                 and any(k in str(c.get("name", "")) for k in wanted)][:limit]
        if not found:
            raise KeyError(keys)
        return "; ".join(f"{c['name']}{_tag(c)}: {_short('—' if c.get('ours') is None else c['ours'])} "
                         f"(**{verdict_text(c)}**)" for c in found)
    return read


def _tag(c: dict[str, Any]) -> str:
    """How a caption marks a reading that is not a paper claim's tallied verdict: ' [our bar]', or ' [off the paper's
    point: …]' (the scorecard tallies neither)."""
    if c.get("kind") == "bar":
        return " [our bar]"
    return f" [off the paper's point: {c['off_point']}]" if c.get("off_point") else ""


def _facts(*keys: str) -> Ours:
    """Ours as the summary's entries whose keys start with one of `keys`, as `key: value`."""
    def read(summary: dict[str, Any], part: str) -> str:
        found = [f"{k}: {v}" for k, v in summary.items() if k.startswith(keys) and not isinstance(v, (dict, list))]
        if not found:
            raise KeyError(keys)
        return "; ".join(found)
    return read


def _quickstart(s: dict[str, Any], part: str) -> str:
    return (f"one {s['strategy']} tree of {s['pair']}; over {s['tokens']} tokens τ {s['tau']} and γ {s['gamma']} "
            f"per target forward; identical to HF generate: {s['lossless']}")


def _classifier(s: dict[str, Any], part: str) -> str:
    return (f"one classifier (hidden 48), kept at epoch {s['chosen_epoch']} of {s['epochs_run']}: recall "
            f"{s['chosen_recall']:.3f} at positive rate θ {s['chosen_positive_rate']:.3f} ({s['training_nodes']:,} "
            f"nodes, {s['training_positives']:,} accepted)")


def _partial_dependence(s: dict[str, Any], part: str) -> str:
    ranges = ", ".join(f"{k} {float(v):.3f}" for k, v in s["pd_range"].items())
    return f"partial-dependence range of the confidence: {ranges}"


def _per_category(s: dict[str, Any], part: str) -> str:
    return f"PCT's τ and nodes per category of the {s['scored_prompts']} scored prompts of {s['prompts']}"


def _then(ours: Ours, first: Ours) -> Ours:
    """`first`, then `ours` where the summary has it (a caption's numbers come first from the figure's own data)."""
    def read(summary: dict[str, Any], part: str) -> str:
        head = first(summary, part)
        try:
            return f"{head}; {ours(summary, part)}"
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            return head
    return read


def _temperature(part: str) -> str:
    """The temperature a stem's `*` matched ("0.0", "0.6") as the summaries name it ("0", "0.6")."""
    return f"{float(part):g}"


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _speed_rows(s: dict[str, Any], temp: str) -> list[dict[str, Any]]:
    """The rows of notebook 03's speed table at temperature `temp`, the table `speedup_T<temp>` draws."""
    return list(s["tables"][f"speed table at T = {temp}"])


def _speedups(s: dict[str, Any], part: str) -> str:
    """The fastest of our strategies in the figure's own table (that temperature's rows; HF's references and our AR
    loop excluded), over HF generate and, where measured, over HF on our kernels."""
    from spectree.speed.references import REFERENCES

    temp = _temperature(part)
    ours = [r for r in _speed_rows(s, temp) if r["method"] not in {*REFERENCES.values(), "AR (our loop)"}
            and _finite(r.get("speedup"))]
    best = max(ours, key=lambda r: float(r["speedup"]))
    text = (f"fastest of our strategies at T = {temp}: {best['method']} {float(best['speedup']):.2f}× HF generate "
            f"(τ {float(best['tau']):.2f}, γ {float(best['gamma']):.1f})")
    same = [r for r in ours if _finite(r.get("speedup_same_kernels"))]
    if same:
        top = max(same, key=lambda r: float(r["speedup_same_kernels"]))
        text += f"; on the same kernels {top['method']} {float(top['speedup_same_kernels']):.2f}×"
    return text


def _time_split(s: dict[str, Any], part: str) -> str:
    """Tree construction's largest share of decoding time in each temperature's panel."""
    found = []
    for key, rows in s["tables"].items():
        if key.startswith("speed table at T = "):
            timed = [r for r in rows if (r.get("forwards") or 0) > 0 and _finite(r.get("tree_frac"))]
            worst = max(timed, key=lambda r: float(r["tree_frac"]))
            found.append(f"at most {100 * float(worst['tree_frac']):.1f}% ({worst['method']}) at "
                         f"{key[len('speed table at '):]}")
    if not found:
        raise KeyError("speed table at T = ")
    return "tree construction's share of decoding time: " + ", ".join(found)


def _agreement(s: dict[str, Any], part: str) -> str:
    """Each pair's top-1 agreement at the first and last draft position (pooled over its datasets)."""
    found = [f"{pair}: {r['top1_by_position'][0]:.2f} at position 1 → {r['top1_by_position'][-1]:.2f} at "
             f"{len(r['top1_by_position'])}" for pair, r in s.items()
             if isinstance(r, dict) and r.get("top1_by_position")]
    if not found:
        raise KeyError("top1_by_position")
    return "top-1 agreement, all datasets pooled: " + "; ".join(found)


def _edd_table2(s: dict[str, Any], part: str) -> str:
    """EDD Table 2's rows as drawn: τ and γ of each."""
    rows = s["edd_table2"]
    if not rows:
        raise KeyError("edd_table2")
    return "EDD Table 2's trees: " + ", ".join(f"{r['spec']} τ {float(r['tau']):.2f} at γ {float(r['gamma']):.1f}"
                                              for r in rows)


REGISTRY: tuple[ResultFigure, ...] = (
    ResultFigure("00_quickstart", "tree", "Gunjur Fig. 4 (tree batch)",
                 "the speculation tree flattened into one sequence, grown by a branching factor b decided at each "
                 "leaf", _quickstart),
    ResultFigure("00_quickstart", "tree_mask", "Gunjur Fig. 4 (attention mask)",
                 "each token attends only to itself and its parents in the tree, at its true position in the "
                 "sequence", _quickstart),
    ResultFigure("01_train_drafts", "agreement_by_position", "—",
                 "no paper figure: each draft's top-1 agreement with the target at every position of a greedy "
                 "chain; EDD Table 1 reports only the chains' τ and α (chains of 5, LLaMA2-Chat 7B: EDD τ 2.73 vs "
                 "VDM 1.96 on MT-bench)", _then(claims("top-1 agreement at draft position 1", limit=2), _agreement)),
    ResultFigure("01_train_drafts", "draft_arms", "EDD Table 3 and Fig. 5",
                 "EDD + PCT τ 3.99 falls to 3.04 w/o the encoding, 3.60 w/o KL, 3.72 w/o random block length "
                 "(LLaMA2-Chat 7B, MT-bench); Fig. 5: best fed from the 28th (fourth-to-last) layer",
                 claims("lowers EDD + PCT τ", "EDD Fig. 5", limit=2)),
    ResultFigure("02_tree_strategies", "tau_gamma_c2t", "C2T Fig. 4",
                 "τ against γ, EAGLE-2's N sweep and C2T's β sweep without and with second TopK 15–30 (LLaMA-2 7B): "
                 "C2T \"consistently achieves lower γ for similar τ\"", claims("C2T Fig. 4", "C2T Table 2")),
    ResultFigure("02_tree_strategies", "tau_gamma_chain", "C2T Table 3 (chain mode)",
                 "chains of at most 10: fixed 5–9 τ 1.98–2.13 at γ 112,231–184,140; DyMax 0.3 τ 2.06 at 127,018; "
                 "DyJoint 0.08 τ 2.12 at 129,876; C2T β 0.85 τ 2.12 at 116,694", claims("C2T Table 3")),
    ResultFigure("02_tree_strategies", "tau_gamma_trees", "EDD Table 2 and DySpec Tables 1–2, drawn as τ against γ",
                 "tables of τ and tree size, no τ–γ plot: VCT, CAPE, EAGLE-2 and PCT on EDD (\"PCT contains only "
                 "about half the number of nodes\" of EAGLE-2 at a competitive τ); DySpec against SpecInfer- and "
                 "Sequoia-style trees. γ log-scaled where one tree dwarfs the rest",
                 _then(claims("EDD Table 2", "DySpec Tables 1–2", limit=2), _edd_table2)),
    ResultFigure("02_tree_strategies", "per_category", "EDD Fig. 7",
                 "τ (left) and the distribution of PCT's node counts (right) per MT-bench category "
                 "(LLaMA2-Chat 7B)", _per_category),
    ResultFigure("03_speed_benchmark", "speedup_T*", "Gunjur Fig. 2, EDD Table 2",
                 "time saved against 4-token speculative decoding: static tree 2.3%, simple cutoff 4.43%, dyn width "
                 "+ depth 6.65%, dyn width only 7.16% (GPT2 → GPT2-large, T = 0.4); EDD + PCT 2.04×–3.62× walltime "
                 "on GPUs", _then(claims("(T = {T})", limit=2), _speedups)),
    ResultFigure("03_speed_benchmark", "time_split", "DySpec Fig. 4",
                 "the execution time of each component of a step: tree construction (in C++) under two percent "
                 "of the total; ours: one panel per temperature", _then(claims("tree construction"), _time_split)),
    ResultFigure("04_entropy_rank", "entropy_rank", "C2T Fig. 2",
                 "mean probability (a) and acceptance rate (b) of ranks 1–20 in seven entropy intervals, and (c) "
                 "acceptance − probability: the top-1 token under-estimated (positive) at high entropy, "
                 "over-estimated (negative) at low",
                 claims("C2T Fig. 2")),
    ResultFigure("05_calibration", "reliability", "EDD Fig. 3b",
                 "acceptance rate of EDD's draft tokens in 10 confidence bins (chains of 10, LLaMA2-Chat 13B, "
                 "MT-bench): well calibrated, ECE 0.019", claims("EDD Fig. 3b", "product of confidences")),
    ResultFigure("06_acceptance_vs_probability", "acceptance_vs_probability", "DySpec Fig. 2",
                 "column-normalised histograms (CNN DailyMail): acceptance (left) and target probability (right) "
                 "against draft probability; higher draft probability, more often accepted; a strong correlation",
                 claims("DySpec Fig. 2", limit=4)),
    ResultFigure("07_entropy_match", "entropy_match", "Gunjur Fig. 1",
                 "the draft's entropy of matched and mismatched speculated tokens (GPT2 → GPT2-large, T = 0.4): "
                 "mismatch grows with entropy and is likelier than a match above entropy 1", claims("Gunjur Fig. 1")),
    ResultFigure("08_classifier_surfaces", "training_curve", "C2T Fig. 6",
                 "training curves (recall, positive rate θ) of two-layer FFNs of hidden size 2–48; at β 0.5 their "
                 "τ are 3.91–4.03, so 12–48 suits", _classifier),
    ResultFigure("08_classifier_surfaces", "scatter3d", "C2T Fig. 9",
                 "the classifier's output over 1,000 random (P, H, d), min-max normalised: \"the joint probability "
                 "has the greatest impact on the confidence score\"", claims("C2T Fig. 9")),
    ResultFigure("08_classifier_surfaces", "surfaces", "C2T Fig. 10",
                 "one feature fixed at three values: fixed-P surfaces widely spaced; high entropy above at low P; "
                 "depth surfaces coincide at high P and diverge at low P, shallower higher",
                 claims("C2T Fig. 10")),
    ResultFigure("08_classifier_surfaces", "partial_dependence", "C2T Fig. 9 (read as partial dependence)",
                 "P has the greatest impact on the confidence; entropy and depth are corrections", _partial_dependence),
    ResultFigure("09_block_sparsity", "mask_random", "DySpec Fig. 7",
                 "a predicted tree's attention mask in the original and in DFS order: \"DFS order is typically "
                 "more conducive to block sparsity\"", claims("random trees")),
    ResultFigure("09_block_sparsity", "mask_logged", "DySpec Fig. 7 (a real tree)",
                 "as above, for a tree of a real run", claims("real draft trees")),
    ResultFigure("09_block_sparsity", "block_counts", "DySpec Fig. 9 and Table 5",
                 "non-zero 32 × 32 blocks, original vs DFS: 366.12 vs 218.31 at 768 nodes, 580.07 vs 295.59 at "
                 "1024; on random trees up to 5.9× fewer; a long prefix dilutes the saving",
                 claims("grows with tree size", "DySpec Fig. 9", "prefix")),
    ResultFigure("09_block_sparsity", "attention_times", "DySpec Fig. 8",
                 "a kernel that skips empty blocks runs 2.21× faster in DFS order (2.27 vs 1.03 ms at 2048 nodes; "
                 "the text says \"up to 2.1×\"), 1.83× faster than xFormers' dense 1.88 ms; dense Manual Attn and "
                 "xFormers unchanged", claims("faster in DFS order", "dense attention")),
    ResultFigure("11_draft_quality", "projected_speedup", "—",
                 "no paper figure: the papers' drafts agree with their targets far more than ours; our trees' "
                 "projected speed as the draft's top-1 agreement rises", _facts("best projected", "1.3x", "2x")),
    ResultFigure("12_retrieval", "speedup_all_prompts", "—",
                 "no paper figure: prompt lookup and suffix branches alone and grafted into a model tree",
                 claims("fastest of our rows")),
    ResultFigure("12_retrieval", "speedup_by_length", "—",
                 "no paper figure: speed by prompt length", claims("1k and 2k", "long prompts")),
    ResultFigure("13_engine_settings", "settings_cpu", "—",
                 "no paper figure: serving engines' tree settings tuned by replay against each engine's default",
                 _facts("claims_tally")),
)


# --- which figures a notebook saves -------------------------------------------------------------------------

def saved_names(notebook: Path) -> list[re.Pattern]:
    """The names a notebook gives `save_figure` (its second argument), as patterns: a literal name exactly, an
    f-string's formatted parts as '.+', a name held in a variable as '.+'."""
    names = []
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        lines = "".join(cell["source"]).splitlines()
        source = "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))  # magics, shell
        for node in ast.walk(ast.parse(source)):
            called = getattr(node, "func", None)
            if not isinstance(node, ast.Call) or getattr(called, "attr", getattr(called, "id", None)) != "save_figure":
                continue
            named = [k.value for k in node.keywords if k.arg == "name"]
            arg = node.args[1] if len(node.args) > 1 else (named or [None])[0]
            if isinstance(arg, ast.Constant):
                names.append(re.escape(str(arg.value)))
            elif isinstance(arg, ast.JoinedStr):
                names.append("".join(re.escape(v.value) if isinstance(v, ast.Constant) else ".+" for v in arg.values))
            else:
                names.append(".+")
    return [re.compile(n) for n in names]


def sources(entry: ResultFigure) -> list[tuple[Path, str]]:
    """The notebook's PNG files this entry shows, with the part `*` matched ("" for a literal stem), sorted."""
    folder = figures_dir() / entry.notebook
    if "*" not in entry.stem:
        path = folder / f"{entry.stem}.png"
        return [(path, "")] if path.is_file() else []
    head, tail = entry.stem.split("*", 1)
    return [(p, p.stem[len(head):len(p.stem) - len(tail)]) for p in sorted(folder.glob(f"{entry.stem}.png"))]


def copy_name(entry: ResultFigure, source: Path) -> str:
    """The file name of a figure's copy in figures/results/: <notebook>-<figure>.png."""
    return f"{entry.notebook}-{source.stem}.png"


# --- the compact copies ---------------------------------------------------------------------------------------

def compact_png(source: Path, max_bytes: int = MAX_BYTES) -> bytes:
    """`source` as a small PNG for a repository page: on white, at most WIDTH px wide (WIDE for a figure at least
    WIDE_ASPECT times wider than tall), an adaptive palette of 256, 128 or 64 colours without dithering, optimised;
    narrower (by the square root of how far it is over, at least 10%) until it fits `max_bytes`."""
    from PIL import Image

    with Image.open(source) as opened:
        rgba = opened.convert("RGBA")
    image = Image.new("RGB", rgba.size, "white")
    image.paste(rgba, mask=rgba.getchannel("A"))
    width = min(image.width, WIDE if image.width >= WIDE_ASPECT * image.height else WIDTH)
    while True:
        scaled = image if width >= image.width else image.resize(
            (width, max(1, round(image.height * width / image.width))), Image.Resampling.LANCZOS)
        for colours in (256, 128, 64):
            buffer = io.BytesIO()
            scaled.quantize(colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
                buffer, "PNG", optimize=True)
            if buffer.tell() <= max_bytes:
                return buffer.getvalue()
            if buffer.tell() > 1.5 * max_bytes:  # fewer colours will not do: narrower at once
                break
        width = max(1, min(int(width * 0.9), int(width * 0.95 * (max_bytes / buffer.tell()) ** 0.5)))


def write_copies(notebooks: list[str]) -> list[Path]:
    """figures/results/: a compact copy (`compact_png`) of every registry figure of these notebooks that this
    checkout holds, each within min(MAX_BYTES, TOTAL_BYTES / their number); any other PNG there is removed, so the
    folder holds exactly what the RESULTS.md written with it shows."""
    folder = figures_dir() / RESULTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    wanted = [(e, path) for e in REGISTRY if e.notebook in notebooks for path, _ in sources(e)]
    budget = min(MAX_BYTES, TOTAL_BYTES // max(1, len(wanted)))
    written = []
    for entry, path in wanted:
        written.append(folder / copy_name(entry, path))
        atomic_write_bytes(written[-1], compact_png(path, budget))
    for stale in set(folder.glob("*.png")) - set(written):
        stale.unlink()
    return written


def copies_text() -> str:
    """How many copies figures/results/ holds and their size: "25 in figures/results/ (1.2 MB)"."""
    copies = sorted((figures_dir() / RESULTS_DIR).glob("*.png"))
    return f"{len(copies)} in figures/{RESULTS_DIR}/ ({sum(p.stat().st_size for p in copies) / 1e6:.1f} MB)"


# --- the markdown -----------------------------------------------------------------------------------------------

def caption(entry: ResultFigure, summary: dict[str, Any], part: str = "") -> str:
    """One line: the paper's figure and what it shows, then what ours shows (computed from the summary; `part`: what
    the stem's `*` matched, named beside it)."""
    try:
        ours = entry.ours(summary, part) if summary else "no summary.json"
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        ours = MISSING
    paper = f"**{entry.paper}**: {entry.says}" if entry.paper != "—" else f"**ours** ({entry.says})"
    which = f" (`{entry.stem.replace('*', part)}`)" if "*" in entry.stem else ""
    return f"{paper}. *This run*{which}: {ours}"


def figure_lines(notebook: str, summary: dict[str, Any], root: bool) -> list[str]:
    """The notebook's registry figures as markdown, each image (from figures/results/ in the repository's
    RESULTS.md, the notebook's own file in figures/RESULTS.md) over its caption; a figure the run did not produce
    as one line."""
    out = []
    for entry in (e for e in REGISTRY if e.notebook == notebook):
        found = sources(entry)
        if root:
            found = [(p, part) for p, part in found if (figures_dir() / RESULTS_DIR / copy_name(entry, p)).is_file()]
        if not found:
            out += [f"*{entry.paper if entry.paper != '—' else entry.stem}*: figure `{entry.stem}` not produced by "
                    f"this run.", ""]
        for path, part in found:
            link = f"figures/{RESULTS_DIR}/{copy_name(entry, path)}" if root else f"{notebook}/{path.name}"
            out += [f"![{entry.paper if entry.paper != '—' else path.stem}]({link})", "",
                    caption(entry, summary, part), ""]
    return out

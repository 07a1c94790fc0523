"""The interactive explorer (ipywidgets): pick a tree policy family (a paper's, or a serving engine's: SGLang,
TensorRT-LLM, a vLLM chain, with the engine's config text for the current knobs), move its knobs, and see τ, γ, τ/γ and
the estimated speedup (replay + cost model, `explorer.explorer`), optionally with retrieval branches
(prompt lookup, the suffix index: the "retrieval" dropdown and the "branch len" slider) grafted into its
trees, the policy on the τ–γ plane of a fixed comparison set, and one logged tree with the nodes it keeps.
"Confirm live" decodes two prompts with the real pair (`speed.bench.run_strategies`) and puts the measured
tokens/s beside the estimate.

Everything is plain Python: `Explorer(...)` builds the widgets without a browser, `values()` returns the
numbers on display, `set_beta()` moves C2T's β and `set_retrieval()` picks the retrieval branches, so tests drive
it directly.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Optional, Union

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np

from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy
import spectree.figures.sweeps  # reached as figures.sweeps
import spectree.figures.trees  # reached as figures.trees
from spectree import figures
from spectree.explorer import explorer as ex
from spectree.explorer.branching import PAPER_RULE, PAPER_TABLE, format_table
from spectree.pricing import price_replay
from spectree.replay.forest import Forest
from spectree.replay.logbook import LoggedPrompt
from spectree.replay.replay import grow_forest
from spectree.speed.costmodel import CostModel
from spectree.claims.names import AR_LABEL, VS_AR, VS_HF, sd_st, to_hf

_SLIDER = dict(continuous_update=False, style={"description_width": "110px"}, layout=W.Layout(width="420px"))


def _int(description: str, value: int, lo: int, hi: int) -> W.IntSlider:
    return W.IntSlider(value=min(max(value, lo), hi), min=lo, max=hi, description=description, **_SLIDER)


def _float(description: str, value: float, lo: float, hi: float, step: float, tooltip: str = "") -> W.FloatSlider:
    return W.FloatSlider(value=value, min=lo, max=hi, step=step, description=description, readout_format=".3f",
                         description_allow_html=False, tooltip=tooltip or None, **_SLIDER)


class Explorer:
    """The explorer over one logbook (or its prebuilt `Forest`).

    cost: the pair's `CostModel` (PCT's s_d/s_t defaults to its one-token forward ratio t_draft(1) / t_target(1),
    the proxy a model-free replay has; live rows measure EDD's mean over PCT's forwards); classifier: a C2T classifier
    module (the C2T family is offered only with one) and classifier_name its data/c2t name (for the live
    run); depth: the EAGLE-2 / C2T default depth; front: a precomputed frontier table (else computed here);
    load_models: returns (target, draft, tokenizer) for the live run (default: `models.load_pair(pair)`),
    called only when "confirm live" is pressed; retrieval: the initial choice of retrieval branches
    (`explorer.explorer.RETRIEVAL`: none, lookup, suffix, lookup+suffix), grafted into every policy's trees with
    "branch len" tokens each (at most the logbook's d_max, which replay needs).

    c2t_logbook: C2T's own logbook of the same prompts (`explorer.explorer.c2t_logbook_of`, its tree at `c2t_beta`
    expanded), where the C2T family and the frontier's C2T points are scored, as notebook 02 scores them (C2T keeps
    nodes off the shared logbook's beams, so there it rarely replays); its β slider then starts at `c2t_beta` and
    its K and depth stop at that logbook's, so every C2T setting offered replays. Without it C2T scores on
    `logbook`. Any setting the logbook cannot replay shows one line saying why (`values()['error']`), never an
    exception.

    ar_over_hf: our AR loop's measured tokens/s over HF generate's on this machine (e.g. notebook 03's `AR (our
    loop)` row): the estimate, a speedup vs our AR loop, is then also shown vs HF generate (`speedup_vs_hf`), the
    live tables' baseline; "confirm live" times our AR loop beside the setting and states both against HF generate."""

    def __init__(self, logbook: Union[list[LoggedPrompt], Forest], cost: CostModel, classifier=None,
                 classifier_name: Optional[str] = None, pair: str = "smollm2-edd", tokenizer: Any = None,
                 depth: Optional[int] = None, front=None, live_prompts: int = 2, live_tokens: int = 16,
                 load_models: Optional[Callable[[], tuple]] = None, family: Optional[str] = None,
                 retrieval: str = "none", c2t_logbook: Union[list[LoggedPrompt], Forest, None] = None,
                 c2t_beta: float = 0.0, ar_over_hf: Optional[float] = None):
        self.ar_over_hf = ar_over_hf
        self.forest = logbook if isinstance(logbook, Forest) else Forest.of(logbook)
        self.c2t_forest = self._own_forest(c2t_logbook)
        if not 0.0 <= c2t_beta <= 1.0:
            raise SpectreeError(f"c2t_beta must be in [0, 1], got {c2t_beta}")
        self.c2t_beta = float(c2t_beta) if self.c2t_forest is not None else 0.0
        self.cost, self.classifier, self.classifier_name = cost, classifier, classifier_name
        self.pair, self.tokenizer, self.live_prompts, self.live_tokens = pair, tokenizer, live_prompts, live_tokens
        self._load_models, self._models = load_models, None
        lps = self.forest.logbook
        self.K, self.d_max = min(lp.K for lp in lps), min(lp.d_max for lp in lps)
        self.depth = min(depth or 6, self.d_max)
        self.front = front if front is not None else ex.frontier(
            self.forest, cost, ex.frontier_policies(self.K, self.d_max, self.depth, cost.ratio, classifier,
                                                    classifier_name or "explorer"), own=self._own())
        self.fields = self._build_fields()
        families = [f for f in ex.FAMILIES if f != "C2T" or classifier is not None]
        self.family = W.Dropdown(options=families, value=family or families[0], description="policy family")
        self.retrieval = W.Dropdown(options=list(ex.RETRIEVAL), value=retrieval, description="retrieval")
        self.retrieval_len = _int("branch len", 8, 1, self.d_max)  # the proposers' default len, within the logbook
        self.retrieval_len.disabled = retrieval == "none"
        self.example = W.IntSlider(value=self.forest.n_trees // 2, min=0, max=self.forest.n_trees - 1,
                                   description="example tree", **_SLIDER)
        self.params = W.VBox()
        self.config = W.Textarea(value="", rows=7, disabled=True, description="engine config",
                                 style={"description_width": "110px"}, layout=W.Layout(width="760px"))
        self.message = W.HTML()
        self.numbers = W.HTML()
        self.plot, self.tree = W.Image(format="png"), W.Image(format="png")
        self.live_button = W.Button(description="confirm live", button_style="info",
                                    tooltip=f"decode {live_prompts} prompts × {live_tokens} tokens with the real pair")
        self.live_out = W.HTML()
        self._values: dict[str, Any] = {}
        self.live_values: dict[str, Any] = {}
        self.timing: dict[str, float] = {}
        self._kept = self._expanded = None
        self._drawn = self.forest  # the forest the current policy was scored on (C2T's own, or the logbook)
        self._retrieval: tuple = ()
        for widget in [self.family, self.example, self.retrieval, self.retrieval_len,
                       *(w for fs in self.fields.values() for w in fs.values())]:
            widget.observe(self._changed, names="value")
        self.live_button.on_click(lambda _: self.confirm_live())
        self.widget = W.VBox([W.HBox([self.family, self.example]), W.HBox([self.retrieval, self.retrieval_len]),
                              self.params, self.config, self.message, self.numbers,
                              W.HBox([self.plot, self.tree]), W.HBox([self.live_button, self.live_out])])
        self._show_params()
        self.refresh()

    # --- building ---------------------------------------------------------------------------------------

    def _own_forest(self, logbook: Union[list[LoggedPrompt], Forest, None]) -> Optional[Forest]:
        """C2T's own logbook as a forest, checked to hold the logbook's trees (the same prompts and positions, in
        order: the example slider picks one tree of both)."""
        if logbook is None:
            return None
        own = logbook if isinstance(logbook, Forest) else Forest.of(logbook)
        def trees(f: Forest) -> list:
            keys = [lp.prompt.key for lp in f.logbook]
            return [(keys[p], int(q)) for p, q in zip(f.tree_prompt, f.tree_position)]
        if trees(own) != trees(self.forest):
            raise SpectreeError("the C2T logbook holds other prompts or positions than the logbook: log it from this "
                                "logbook (explorer.explorer.c2t_logbook_of)")
        return own

    def _own(self) -> dict[str, Forest]:
        """The families scored on a forest of their own (C2T, given its logbook)."""
        return {} if self.c2t_forest is None else {"C2T": self.c2t_forest}

    def forest_of(self, family: str) -> Forest:
        """The forest `family`'s settings are scored on."""
        return self._own().get(family, self.forest)

    def _build_fields(self) -> dict[str, dict[str, W.Widget]]:
        K, D, depth = self.K, self.d_max, self.depth
        c2t_K, c2t_D, beta0 = K, D, 0.0  # C2T's knobs: within its own logbook, from its envelope β up
        if self.c2t_forest is not None:
            own = self.c2t_forest.logbook
            c2t_K, c2t_D, beta0 = min(lp.K for lp in own), min(lp.d_max for lp in own), self.c2t_beta

        def shape(k: int, d: int, keys: tuple[str, str] = ("K", "d_max"), k_name: str = "K (children)"
                  ) -> dict[str, W.Widget]:  # keys: the policy's own names for its width and depth
            return {keys[0]: _int(k_name, min(k, K), 1, K), keys[1]: _int("d_max (depth)", min(d, D), 1, D)}

        return {
            "C2T": {"beta": _float("β (C2T)", max(0.5, beta0), beta0, 1.0, 0.01),
                    "topk": _int("topK per layer (0 = off)", 0, 0, c2t_K),
                    "K": _int("K (children)", min(10, c2t_K), 1, c2t_K),
                    "d_max": _int("d_max (depth)", min(depth, c2t_D), 1, c2t_D)},
            "EAGLE-2": {"N": _int("N (verified, root incl.)", 20, 1, 128), **shape(10, depth)},
            "DySpec budget": {"m": _int("budget m", 16, 1, 256), **shape(8, D)},
            "DySpec threshold": {"t": W.FloatLogSlider(value=0.05, base=10, min=-4, max=0, step=0.05,
                                                       description="threshold t", readout_format=".4f", **_SLIDER),
                                 **shape(8, D)},
            "PCT": {"ratio": _float("s_d/s_t", round(self.cost.ratio, 3), 0.0, 1.0, 0.001,
                                    tooltip=sd_st("one-token") + " of this pair by default"),
                    **shape(5, D, ("k", "d_max"), "k (width)")},
            "B(H)": {"mode": W.ToggleButtons(options=["expression", "table"], value="expression",
                                             description="B(H) as"),
                     "expression": W.Text(value=PAPER_RULE, description="B(H) =", continuous_update=False,
                                          layout=W.Layout(width="620px")),
                     "table": W.Textarea(value=format_table(PAPER_TABLE), continuous_update=False, rows=6,
                                         description="H bound, width", style={"description_width": "110px"}),
                     **shape(7, min(4, D), ("k_max", "d"), "k_max (widest)")},
            "SGLang": {"steps": _int("steps (depth)", min(5, D), 1, D), "topk": _int("eagle topk", min(4, K), 1, K),
                       "tokens": _int("draft tokens", 8, 2, 128)},
            "TensorRT-LLM": {"layers": _int("max_draft_len", min(6, D), 1, D),
                             "topk": _int("dynamic topK", min(10, K), 1, K),
                             "tokens": _int("total draft tok.", min(60, K * D), 1, 128)},
            "vLLM": {"tokens": _int("spec. tokens", min(2, D), 1, D)},  # vLLM drafts a chain of this many
        }

    def _show_params(self) -> None:
        fields = self.fields[self.family.value]
        self.params.children = [W.HBox(list(fields.values())[i:i + 2]) for i in range(0, len(fields), 2)]

    def settings(self) -> dict[str, Any]:
        return {key: w.value for key, w in self.fields[self.family.value].items()}

    # --- scoring and display ----------------------------------------------------------------------------

    def _changed(self, change) -> None:
        if change["owner"] is self.family:
            self._show_params()
        if change["owner"] is self.retrieval:
            self.retrieval_len.disabled = change["new"] == "none"
        if change["owner"] is self.retrieval_len and self.retrieval.value == "none":
            return  # the branches' length changes nothing without branches
        if change["owner"] is self.example and self._kept is not None:
            self._draw_tree()
            return
        self.refresh()

    def refresh(self) -> dict[str, Any]:
        """Re-score the current settings and redraw; returns `values()`."""
        t0 = time.perf_counter()
        family, settings = self.family.value, self.settings()
        values: dict[str, Any] = {"family": family, "settings": settings, "retrieval": self.retrieval.value,
                                  "spec": "", "error": ""}
        forest = self.forest_of(family)
        try:
            policy = self.policy()
            values["spec"] = policy.spec
            growth = grow_forest(forest, policy)
            roots = forest.cols["parents"] < 0  # offered children from the last committed token's forward
            self._kept, self._expanded, self._policy_K = growth.kept, growth.fed | roots, policy.K
            self._retrieval, self._drawn = policy.retrieval, forest
            numbers = price_replay(forest, policy, self.cost, growth)
            values.update({k: numbers[k] for k in ("tau", "gamma", "tau_per_gamma", "speedup", "step_ms",
                                                   "ms_per_token", "steps")})
            values["speedup_vs_hf"] = to_hf(numbers["speedup"], self.ar_over_hf)
            values["config"] = ex.engine_text(family, policy) if not policy.retrieval else ""
        except SpectreeError as err:
            self._kept = None
            why = str(err)
            if family == "C2T" and forest is self.forest and "not expanded" in why:
                why += " (C2T keeps nodes off the logbook's beams: give the explorer C2T's own logbook, c2t_logbook)"
            values.update(error=why, tau=math.nan, gamma=math.nan, tau_per_gamma=math.nan, speedup=math.nan,
                          speedup_vs_hf=math.nan, config="")
        self.config.value = values["config"] or "(the engines run the families below their own names: SGLang, " \
                                                "TensorRT-LLM, vLLM)"
        self.config.layout.display = None if family in ex.ENGINE_OF else "none"
        self._values = values
        self.timing["score_ms"] = 1000 * (time.perf_counter() - t0)
        self._show_numbers()
        t1 = time.perf_counter()
        self._draw_plot()
        self._draw_tree()
        self.timing["draw_ms"] = 1000 * (time.perf_counter() - t1)
        return self.values()

    def policy(self) -> Policy:
        """The policy the current settings describe: the family's, with the chosen retrieval branches grafted into
        its trees (a `Hybrid`; the family's own policy when retrieval is 'none')."""
        policy = ex.policy_for(self.family.value, self.settings(), self.classifier, self.classifier_name or "explorer")
        return ex.with_retrieval(policy, self.retrieval.value, self.retrieval_len.value)

    def values(self) -> dict[str, Any]:
        """The numbers on display: family, settings, τ, γ, τ/γ, estimated `speedup` vs our AR loop and
        `speedup_vs_hf` vs HF generate (NaN without `ar_over_hf`; NaN and `error` when the logbook cannot replay the
        settings)."""
        return dict(self._values)

    def set_beta(self, beta: float) -> dict[str, Any]:
        """Switch to C2T and set β (what a user does with the dropdown and the slider); returns `values()`."""
        if "C2T" not in self.family.options:
            raise SpectreeError("this explorer has no C2T classifier")
        if not self.c2t_beta <= float(beta) <= 1.0:
            raise SpectreeError(f"β must be in [{self.c2t_beta:g}, 1]" + (
                f": C2T's logbook expands its tree at β {self.c2t_beta:g}, lower β do not replay on it"
                if self.c2t_beta else ""))
        self.family.value = "C2T"
        self.fields["C2T"]["beta"].value = float(beta)
        return self.values()

    def set_retrieval(self, retrieval: str, length: Optional[int] = None) -> dict[str, Any]:
        """Pick the retrieval branches (a key of `explorer.explorer.RETRIEVAL`) and, if given, their length in tokens
        (what a user does with the dropdown and the slider); returns `values()`."""
        if retrieval not in self.retrieval.options:
            raise SpectreeError(f"unknown retrieval '{retrieval}': use one of {list(self.retrieval.options)}")
        if length is not None and not 1 <= int(length) <= self.d_max:
            raise SpectreeError(f"branch len must be 1..{self.d_max} (the logbook's d_max), got {length}")
        if length is not None:
            self.retrieval_len.value = int(length)  # re-scores unless retrieval is still 'none'
        self.retrieval.value = retrieval  # re-scores if it changed
        return self.values()

    def _show_numbers(self) -> None:
        v = self._values
        self.message.value = (f"<div style='color:#b00020;font-family:monospace'>⚠ {_escape(v['error'])}</div>"
                              if v["error"] else "")
        if v["error"]:
            self.numbers.value = "<b>no score</b> for these settings"
            return
        vs_hf = v.get("speedup_vs_hf", math.nan)
        cells = [("τ", f"{v['tau']:.3f}"), ("γ", f"{v['gamma']:.2f}"), ("τ/γ", f"{v['tau_per_gamma']:.3f}"),
                 *([(f"est. speedup {VS_HF}", f"{vs_hf:.2f}×")] if vs_hf == vs_hf else []),
                 (f"est. speedup {VS_AR}", f"{v['speedup']:.2f}×"), ("est. ms/step", f"{v['step_ms']:.1f}"),
                 ("est. tok/s", f"{1000 / v['ms_per_token']:.1f}"), ("steps", str(v["steps"]))]
        self.numbers.value = ("<table style='font-size:14px'><tr>" + "".join(f"<th style='padding:0 10px'>{k}</th>"
                              for k, _ in cells) + "</tr><tr>" + "".join(
                              f"<td style='padding:0 10px;text-align:center'>{x}</td>" for _, x in cells) +
                              f"</tr></table><small>replay + cost model ({self.timing['score_ms']:.0f} ms)</small>")

    def _draw_plot(self) -> None:
        retrieval = "" if self._values["retrieval"] == "none" else " + " + self._values["retrieval"]
        with plt.ioff():
            ax = figures.sweeps.plot_frontier(self.front, None if self._values["error"] else self._values,
                                              label=f"current ({self._values['family']}{retrieval})")
            self.plot.value = figures.png(ax.figure)

    def _draw_tree(self) -> None:
        if self._kept is None:
            self.tree.value = b""
            return
        with plt.ioff():
            ax = figures.trees.draw_kept_tree(self._drawn, int(self.example.value), self._kept, self._policy_K,
                                              self._expanded, self.tokenizer, retrieval=self._retrieval)
            self.tree.value = figures.png(ax.figure)

    # --- live confirmation ------------------------------------------------------------------------------

    def models(self) -> tuple:
        """(target, draft, tokenizer), loaded on first use."""
        if self._models is None:
            if self._load_models is None:
                from spectree.models.loading import load_pair
                self._models = load_pair(self.pair)
            else:
                self._models = self._load_models()
        return self._models

    def confirm_live(self) -> dict[str, Any]:
        """Decode `live_prompts` prompts of the logbook with the current settings, our AR loop and HF generate (the
        reference) and show measured tokens/s and speedup vs HF generate beside the estimate, the estimate's speedup
        vs our AR loop turned vs HF generate by our AR loop's live ratio (`names.to_hf`); returns those numbers."""
        from spectree.speed.bench import run_strategies, summarize_runs
        from spectree.speed.references import HF
        from spectree.strategies.chain import autoregressive

        settings = self.settings()
        self.live_out.value = "<i>decoding…</i>"
        try:
            if self._values.get("error"):
                raise SpectreeError("fix the settings first: " + self._values["error"])
            policy = self.policy()
            label = policy.spec + (f" with B(H) = {settings[settings['mode']]}" if "mode" in settings else "")
            prompts = [lp.prompt for lp in self.forest.logbook[: self.live_prompts]]
            models, skipped = self.models(), {}
            runs = run_strategies(models, prompts, {label: policy, AR_LABEL: autoregressive()}, self.live_tokens,
                                  skipped=skipped)
            if skipped:
                raise SpectreeError(f"live decoding skipped it: {next(iter(skipped.values()))}")
            table = summarize_runs(runs).set_index("strategy")
            row, ref, ar = table.loc[label], table.loc[HF], table.loc[AR_LABEL]
            live = {"spec": label, "tokens_per_s":
                    float(row.tokens_per_s), "speedup": float(row.speedup), "tau": float(row.tau),
                    "gamma": float(row.gamma), "hf_tokens_per_s": float(ref.tokens_per_s),
                    "ar_over_hf": float(ar.speedup), "error": ""}
            est = self._values
            est_hf = to_hf(est["speedup"], live["ar_over_hf"])
            self.live_out.value = (f"<b>live</b> ({len(prompts)} prompts × {self.live_tokens} tokens): "
                                   f"{live['tokens_per_s']:.1f} tok/s, speedup {live['speedup']:.2f}× {VS_HF} "
                                   f"({live['hf_tokens_per_s']:.1f} tok/s; our AR loop {live['ar_over_hf']:.2f}×), "
                                   f"τ {live['tau']:.2f}, γ {live['gamma']:.1f}"
                                   f" &nbsp;|&nbsp; <b>estimate</b>: {1000 / est['ms_per_token']:.1f} tok/s, "
                                   f"speedup {est_hf:.2f}× {VS_HF} ({est['speedup']:.2f}× {VS_AR} × our AR loop's "
                                   f"live ratio), τ {est['tau']:.2f}, γ {est['gamma']:.1f}")
        except (SpectreeError, OSError) as err:
            live = {"error": str(err)}
            self.live_out.value = f"<span style='color:#b00020'>⚠ live run failed: {_escape(str(err))}</span>"
        self.live_values = live
        return live

    def _ipython_display_(self) -> None:
        from IPython.display import display
        display(self.widget)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def initial_values(explorer: Explorer) -> dict[str, Any]:
    """The explorer's current numbers as JSON-ready values (NaN → None), plus the frontier, for summary.json."""
    def clean(x):
        return None if isinstance(x, float) and not np.isfinite(x) else x
    return {**{k: clean(v) for k, v in explorer.values().items()}, "timing_ms": explorer.timing,
            "frontier": [{k: clean(v) for k, v in row.items()} for row in explorer.front.to_dict("records")]}

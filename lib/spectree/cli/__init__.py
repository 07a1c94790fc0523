"""`python -m spectree {try,strategies,bench,lossless,log,replay,train,acceptance,tune}`. Every argument is validated
before a model loads."""
from __future__ import annotations


import argparse
import signal
import sys
from dataclasses import fields
from pathlib import Path

from spectree.cli.args import (LIST_STRATEGIES, PAIR_HELP, STRATEGIES_HELP, _chat, _common, _kernels,
                               _log_type, _number, _output_file, _Parser, _placement, _Renamed,
                               _train_type, _whole)
from spectree.cli.commands import (cmd_acceptance, cmd_bench, cmd_log, cmd_lossless, cmd_replay, cmd_train,
                                   cmd_tune)
from spectree.cli.helps import LOG_HELP, TRAIN_HELP
from spectree.cli.tour import TRY_PAIR, TRY_STRATEGY, cmd_strategies, cmd_try
from spectree.core.errors import SpectreeError
from spectree.core.machine import environment
from spectree.prompts import CHAT_ENV, said_raw

DEFAULT_STRATEGIES = ["chain:k=4", "kary:b=2,d=4"]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="spectree", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    tp = sub.add_parser("try", help="decode one prompt with HF generate and one tree policy: the text, τ, γ, "
                                    "tokens/s, the speedup and whether the outputs are identical")
    tp.add_argument("prompt", help='the text to decode, e.g. "Write a haiku about trees"')
    tp.add_argument("--strategy", default=TRY_STRATEGY,
                    help="the tree policy spec (default: %(default)s, the fastest of RESULTS.md's speed table on "
                         "smollm2-edd)" + LIST_STRATEGIES)
    tp.add_argument("--pair", default=TRY_PAIR, help=PAIR_HELP)
    _placement(tp)
    _chat(tp)
    tp.add_argument("--max-new-tokens", type=_whole(1), default=64,
                    help="new tokens (fewer where the target stops at EOS)")
    tp.add_argument("--repeats", type=_whole(1), default=1, help="timed passes (the speedup: their median)")
    _kernels(tp)
    st = sub.add_parser("strategies", help="list every strategy spec: its knobs, their defaults and its paper "
                                           "(no model loads)")
    st.add_argument("--verbose", action="store_true", help="also the first sentence of each strategy's docstring")
    b = sub.add_parser("bench", help="tokens/s and speedup vs HF generate, τ, γ per strategy")
    _common(b, "mtbench:16", 128)
    b.add_argument("--strategies", nargs="+", default=["ar"] + DEFAULT_STRATEGIES,
                   help=STRATEGIES_HELP + LIST_STRATEGIES)
    b.add_argument("--temperature", type=_number(0, 10, closed=True), default=0.0,
                   help="sampling temperature T (0: greedy)")
    b.add_argument("--top-p", type=_number(0, 1), default=1.0, help="nucleus sampling's p at T > 0 (1: off)")
    b.add_argument("--seed", type=int, default=0, help="seed of the sampling generator")
    b.add_argument("--hf-assisted", action="store_true",
                   help="also time HF assisted generation with the pair's standalone draft (VDM, layer-skip)")
    b.add_argument("--hf-prompt-lookup", type=_whole(0), default=0, metavar="N",
                   help="also time HF prompt lookup decoding with N candidate tokens (needs no draft; 0: not)")
    b.add_argument("--repeats", type=_whole(1), default=1,
                   help="timed passes per prompt, interleaved (speedup: the median over passes, speedup_min beside)")
    ll = sub.add_parser("lossless", help="greedy exact match (lengths too) against HF generate")
    _common(ll, "mtbench:50+humaneval:50", 64)
    ll.add_argument("--strategies", nargs="+", default=DEFAULT_STRATEGIES, help=STRATEGIES_HELP + LIST_STRATEGIES)
    for p in (b, ll):
        _kernels(p)
    lg = sub.add_parser("log", help="write a logbook of full draft trees for replay")
    _common(lg, "mtbench:16", 128)
    from spectree.replay.logbook import LogConfig
    for f in fields(LogConfig):
        if f.name not in ("pair", "max_new_tokens", "c2t", "c2t_beta", "shape"):
            lg.add_argument(f"--{f.name.replace('_', '-')}", default=f.default, help=LOG_HELP.get(f.name),
                            **_log_type(f))
    from spectree.replay.logtree import LogTree
    lg.add_argument("--shape", choices=LogTree.SHAPES, default="full",
                    help="what is expanded: full (every policy replays), path (the greedy path and the rank-0 chain: "
                         "every token a greedy verifier could examine), c2t (C2T's tree alone, with --c2t), dyspec "
                         "(the DySpec trees of --dyspec-budgets)")
    lg.add_argument("--c2t", default="", help="a C2T classifier (data/c2t/NAME.safetensors): its tree at --c2t-beta "
                                              "is expanded too, so C2T at every β >= it replays")
    lg.add_argument("--c2t-beta", type=_number(0, 1, closed=True), default=0.5,
                    help="C2T's β the --c2t tree is expanded at")
    lg.add_argument("--name", help="logbook name (default: the prompt spec)")
    tr = sub.add_parser("train", help="distil a one-layer draft (EDD / VDM) from the target; resumable")
    tr.add_argument("--name", required=True, help="checkpoint name, e.g. smollm2-edd")
    tr.add_argument("--target", default="smollm2-135m-instruct",
                    help="the model distilled from: a registry name, a model folder, a GGUF file or a cached hub id")
    from spectree.drafts.storage import PRECISIONS
    from spectree.training.training import SAVE_EVERY_S, TrainConfig
    for f in fields(TrainConfig):
        tr.add_argument(f"--{f.name.replace('_', '-')}", default=f.default, help=TRAIN_HELP.get(f.name),
                        **_train_type(f))
    tr.add_argument("--max-minutes", type=_number(0), help="stop (with a checkpoint) after this long (default: no limit)")
    tr.add_argument("--threads", type=_whole(1), help="torch CPU threads (default: torch's choice)")
    tr.add_argument("--save-every", type=_number(0, closed=True), default=SAVE_EVERY_S, metavar="SECONDS",
                    help="seconds between checkpoints, 0: every step (one is also saved on Ctrl-C)")
    tr.add_argument("--restart", action="store_true",
                    help="start over, discarding a saved state of this name (one made with other settings is refused)")
    tr.add_argument("--export", action="store_true", help="write data/drafts/<name>.safetensors + card when done")
    tr.add_argument("--precision", choices=PRECISIONS, default="fp16",
                    help="how --export stores the layer: fp16, or int8 rows (half the bytes; drafts.storage)")
    tr.add_argument("--init-from", type=Path, help="start from this shipped checkpoint when no saved state exists "
                                                   "(default: a fresh layer)")
    tr.add_argument("--init-step", type=_whole(0), default=0, help="the step that checkpoint had reached")
    ac = sub.add_parser("acceptance", help="draft top-1 agreement by position and chain-k greedy τ")
    _common(ac, "mtbench:16+humaneval:16", 128)
    ac.add_argument("--depth", type=_whole(1), default=5, help="positions scored ahead, and the chain's k for τ")
    ac.add_argument("--card", action="store_true", help="also store the result as the held-out metrics in the draft's card")
    tu = sub.add_parser("tune", help="a serving engine's speculative settings from a logbook, ranked by projected "
                                     "speedup, as the engine's own config text")
    tu.add_argument("--engine", required=True, choices=("sglang", "trtllm", "vllm"), help="the serving engine to tune")
    tu.add_argument("--logbook", help="a logbook folder or name (data/cache/logbooks/); else --pair and --prompts, "
                                      "logged first")
    tu.add_argument("--pair", help="the pair to log (named, a preset or TARGET+DRAFT; default: none, --logbook's)")
    tu.add_argument("--prompts", help="prompt spec to log, e.g. jsonl:questions.jsonl (default: none, --logbook's)")
    tu.add_argument("--max-prompts", type=_whole(1), default=16,
                    help="log at most this many of them, evenly spread over the spec (every category of a file)")
    tu.add_argument("--positions", type=_whole(1), default=32, dest="max_new_tokens", metavar="N",
                    help="greedy positions logged per prompt (and new tokens per prompt with --confirm)")
    tu.add_argument("--max-new-tokens", action=_Renamed, now="--positions (greedy positions logged per prompt)")
    _placement(tu)
    tu.add_argument("--cost-model", metavar="FILE[:SHAPE[:REGIME]]",
                    help="price trees with this cost model: the GPU checklist's costmodel.json (:SHAPE, e.g. "
                         ":llama-3.1-8b, default its largest; :REGIME eager (default: eager PyTorch, the papers') or "
                         "graphs (CUDA graphs, the engines')) or a JSON t(n) curve {sizes, target_s, draft_s}; "
                         "default: the pair's measured on this machine")
    tu.add_argument("--top", type=_whole(1), default=5, help="settings printed")
    tu.add_argument("--draft-model", default=None, help="the draft model's path as the config text names it "
                                                        "(default: a placeholder to fill in)")
    tu.add_argument("--draft-kind", choices=("eagle", "eagle3"), default="eagle",  # engines.DRAFT_KINDS (no torch here)
                    help="the draft the engine serves: an EAGLE-1/2 head (eagle) or an EAGLE-3 head (eagle3); picks "
                         "the engine's algorithm / decoding type / method name")
    tu.add_argument("--token-map", type=_output_file, metavar="PATH",
                    help="also write the pair's reduced draft vocabulary (a NAME@V draft) as SGLang's "
                         "--speculative-token-map file")
    tu.add_argument("--confirm", type=_whole(0), default=0, metavar="N",
                    help="after ranking, decode the best setting and the engine's default live on N held-out prompts "
                         "on this machine and print measured beside projected speedups")
    tu.add_argument("--confirm-prompts", metavar="SPEC",
                    help="where --confirm draws its prompts (those not logged); default: the logbook's own prompt sets")
    tu.add_argument("--json", type=_output_file, help="also write the report here (atomically)")
    rp = sub.add_parser("replay", help="score strategies on a logbook without a model")
    rp.add_argument("logbook", type=Path, help="a logbook folder (data/cache/logbooks/NAME)")
    rp.add_argument("--strategies", nargs="+", default=["ar"] + DEFAULT_STRATEGIES,
                    help=STRATEGIES_HELP + LIST_STRATEGIES)
    rp.add_argument("--min-trees", type=_whole(0), default=0,
                    help="repeat the logbook until it holds this many trees (to time replay at scale)")
    rp.add_argument("--json", type=_output_file, help="also write the results here (atomically)")
    return parser


COMMANDS = {"try": cmd_try, "strategies": cmd_strategies, "bench": cmd_bench, "lossless": cmd_lossless, "log": cmd_log, "replay": cmd_replay, "train": cmd_train,
            "acceptance": cmd_acceptance, "tune": cmd_tune}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    chat = getattr(args, "chat", None)
    said_raw.clear()  # a command says once that its prompts go in as raw text (`prompts.check_prompts`)
    # how prompts become ids, for this process and the workers it spawns (`prompts.chat_mode`)
    try:
        with environment({} if chat is None else {CHAT_ENV: "yes" if chat else "no"}):
            return COMMANDS[args.command](args)
    except SpectreeError as err:
        print(f"spectree: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM during training (which saved a checkpoint first)
        print("spectree: interrupted", file=sys.stderr)
        return 128 + getattr(err, "signum", signal.SIGINT)

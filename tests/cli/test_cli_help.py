"""The command line explains itself: every flag of every subcommand has help that shows its default, `strategies`
lists every registered spec with its knobs and paper (no model), and `try` refuses bad input in one line before a
model loads, then decodes one prompt exactly as HF generate does."""
from __future__ import annotations

import argparse
import re
from dataclasses import fields

import pytest
from helpers import offline_home, refuse

from spectree.cli import COMMANDS, build_parser, main
from spectree.cli.args import _Formatter
from spectree.cli.helps import LOG_HELP, TRAIN_HELP


def subparsers() -> dict[str, argparse.ArgumentParser]:
    return dict(build_parser()._subparsers._group_actions[0].choices)


def shown_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """An action's help as --help prints it (its default appended by the formatter, `%(default)s` expanded)."""
    return parser._get_formatter()._expand_help(action)


def test_every_command_has_a_subparser_with_the_defaults_formatter():
    parsers = subparsers()
    assert set(parsers) == set(COMMANDS)
    for name, parser in parsers.items():
        assert parser.formatter_class is _Formatter, name
        assert parser.format_help()  # every help renders (a stray '%' in a help text would raise here)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_flag_has_help_that_shows_its_default(command):
    """Each action but -h (and a renamed flag's hidden refusal) has help; an optional, not required one shows its
    default ('default: ...', appended by the formatter or written in the help)."""
    parser = subparsers()[command]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help, f"{command} {name} has no help"
        if action.option_strings and not action.required:
            assert "default:" in shown_help(parser, action), f"{command} {name}: {shown_help(parser, action)}"


def test_the_flags_made_from_dataclass_fields_have_a_help_entry_each():
    from spectree.training.training import TrainConfig
    from spectree.replay.logbook import LogConfig

    assert set(TRAIN_HELP) == {f.name for f in fields(TrainConfig)}
    assert set(LOG_HELP) == {f.name for f in fields(LogConfig)}


def test_strategies_flags_point_to_the_strategies_command():
    for command in ("bench", "lossless", "replay"):
        (action,) = [a for a in subparsers()[command]._actions if a.dest == "strategies"]
        assert "python -m spectree strategies" in action.help


def test_strategies_lists_every_registered_spec_with_its_knobs_and_paper(tmp_path, monkeypatch, capsys):
    """Every strategy and retrieval proposer, its knobs with their defaults read from its dataclass, its paper; the
    spec listed parses back to the default policy; no model loads."""
    from spectree.cli.tour import strategy_rows
    from spectree.core.policy import spec_fields
    from spectree.retrieval.proposers import RETRIEVERS
    from spectree.strategies import PAPERS, REGISTRY, parse_strategy

    offline_home(tmp_path, monkeypatch)  # every model loader raises
    assert main(["strategies"]) == 0
    printed = capsys.readouterr().out
    assert set(PAPERS) == set(REGISTRY) | set(RETRIEVERS)
    rows = {r["name"]: r for r in strategy_rows()}
    assert list(rows) == [*REGISTRY, *RETRIEVERS]
    for name, factory in {**REGISTRY, **RETRIEVERS}.items():
        row = rows[name]
        assert f"\n  {row['spec']}\n      paper: {PAPERS[name]}\n" in printed
        knobs = [f.name for f in spec_fields(factory)] if isinstance(factory, type) else []
        assert [k for k, _, _ in row["knobs"]] == knobs
        block = re.split(r"\n  (?=\S)", printed.split(f"\n  {row['spec']}\n", 1)[1], maxsplit=1)[0]
        assert all(f"      {k}=" in block for k in knobs), block
    assert rows["dyspec"]["spec"] == "dyspec:m=64,K=8,d_max=11"
    assert rows["pct"]["spec"] == "pct:k=5,d_max=10,leaf_min=0.01"  # ratio unset: measured
    for name in REGISTRY:
        if name not in ("choices", "c2t"):  # choices needs paths= or file=; c2t loads its trained classifier
            assert parse_strategy(rows[name]["spec"]) == REGISTRY[name]()
    assert parse_strategy(f"pct+{rows['lookup']['spec']}+{rows['suffix']['spec']}").retrieval == (
        RETRIEVERS["lookup"](), RETRIEVERS["suffix"]())


@pytest.mark.parametrize("argv, message", [
    (["try", "  "], "the prompt is empty"),
    (["try", "hi", "--strategy", "dyspec:m=x"], "dyspec: m must be a whole number, got 'x'"),
    (["try", "hi", "--strategy", "nope"], "unknown strategy 'nope'"),
    (["try", "hi", "--max-new-tokens", "0"], "--max-new-tokens: expected a whole number >= 1, got '0'"),
    (["try", "hi", "--pair", "nope"], "unknown pair 'nope'"),
    (["try", "hi"], "no checkpoint data/drafts/smollm2-edd.safetensors"),  # the default pair, absent from this home
    (["try", "hi", "--pair", "smollm2-layerskip", "--max-new-tokens", "9000"], "context window"),
])
def test_try_refuses_bad_input_in_one_line_before_a_model_loads(argv, message, tmp_path, monkeypatch, capsys):
    assert message in refuse(argv, capsys, offline_home(tmp_path, monkeypatch))


def test_tune_counts_positions_and_names_the_renamed_flag(tmp_path, monkeypatch, capsys):
    args = build_parser().parse_args(["tune", "--engine", "sglang", "--positions", "7"])
    assert args.max_new_tokens == 7  # the attribute `cmd_tune` and `tune` read
    home = offline_home(tmp_path, monkeypatch)
    assert "--max-new-tokens is now --positions" in refuse(["tune", "--engine", "sglang", "--max-new-tokens", "7"],
                                                           capsys, home)


def test_log_reads_dyspec_budgets_and_a_sequoia_vector(tmp_path, monkeypatch, capsys):
    args = build_parser().parse_args(["log", "--dyspec-budgets", "8,64", "--dyspec-sequoia", "0.6/0.2"])
    assert args.dyspec_budgets == (8, 64) and args.dyspec_sequoia == (0.6, 0.2)
    home = offline_home(tmp_path, monkeypatch)
    assert "--dyspec-budgets: expected whole numbers >= 1" in refuse(["log", "--dyspec-budgets", "8,x"], capsys, home)
    assert "--dyspec-sequoia: expected probabilities in (0, 1]" in refuse(["log", "--dyspec-sequoia", "0.6/nan"],
                                                                        capsys, home)


@pytest.mark.slow
def test_try_decodes_a_prompt_on_the_real_pair_identically_to_hf_generate(capsys):
    """The README's first command on the shipped pair (a few tokens): the text, τ, γ, the speedup, identical."""
    assert main(["try", "Write a haiku about trees", "--max-new-tokens", "8"]) == 0
    printed = capsys.readouterr().out
    for line in ("HF generate:", "τ = ", "γ = ", "speedup vs HF generate: ", "identical to HF generate: True"):
        assert line in printed, printed

"""The bf16 control on this machine (`speed.divergence`), one random pair of a real shape: HF SDPA vs HF eager,
our AR loop vs each, our trees vs our AR loop; its JSON into figures/bf16_control/<shape>-<dtype>-<device>.json and
its two tables printed. The GPU checklist runs the same control on its cost shapes (`gpu.gpu_check`).

    python -m spectree.gpu.bf16_control --shape llama-3.2-1b                       # 4 prompts, 64 + 24 tokens
    python -m spectree.gpu.bf16_control --shape llama-3.1-8b --prompts 2 --prompt-tokens 32 --tokens 16
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional

from spectree.core.errors import SpectreeError
from spectree.core.paths import atomic_write_text, figures_dir

from spectree.gpu.gpu_summary import CPU_CONTROL as STEM


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spectree.gpu.bf16_control", description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="llama-3.2-1b", help="a shape of models.random_pairs.SHAPES")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--prompts", type=int, default=4, help="tracked prompts (data/prompts/gpu_check.jsonl)")
    parser.add_argument("--prompt-tokens", type=int, default=64, help="each prompt cut to this many tokens")
    parser.add_argument("--tokens", type=int, default=24, help="new tokens per generation")
    parser.add_argument("--out", type=Path, default=None, help=f"folder (default figures/{STEM})")
    args = parser.parse_args(argv)
    try:
        from spectree.models.random_pairs import check_shape

        check_shape(args.shape)
        if min(args.prompts, args.prompt_tokens, args.tokens) < 1:
            raise SpectreeError("--prompts, --prompt-tokens and --tokens must be >= 1")
    except SpectreeError as err:
        print(f"bf16_control: error: {err}", file=__import__("sys").stderr)
        return 2
    from spectree.claims.text import jsonable
    from spectree.reports.results import stamp
    from spectree.speed.divergence import noise_table, run, table

    result = run(args.shape, args.dtype, args.device, args.prompts, args.prompt_tokens, args.tokens)
    result["run"] = stamp(STEM)
    out = args.out or figures_dir() / STEM
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{args.shape}-{args.dtype}-{args.device}.json"
    atomic_write_text(path, json.dumps(jsonable(result), indent=1) + "\n")
    print(table(result).to_string(index=False))
    print(noise_table(result).to_string(index=False))
    print(f"control floor {result['floor']:.4g}; {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Every figure the notebooks draw, one module per concept (`trees`, `sweeps`, `speed`, `entropy`, `calibration`,
`classifier`, `sparsity`, `draft_quality`, `quality_sweep`; each checked by `checks`), and here the saving of figures
and numbers atomically under `figures_dir()`.

Static figures are matplotlib/seaborn PNGs, interactive ones plotly HTML; both land in
`figures_dir()/<notebook>/<name>.<ext>` through `atomic_write_bytes`, so a reader never sees half a file. Every PNG
is checked as it is saved (`checks.figure_problems`: "nan" text, a legend over data, a shape no page shows); a
problem is a `checks.FigureProblem` warning, not an error, so a long run still finishes.
"""
from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from spectree.core.paths import atomic_write_bytes, atomic_write_text, figures_dir

# every figure is checked as it is saved; the figures by concept are modules of this package
# (`figures.trees`, `figures.speed`, ...), each imported where it is drawn
from spectree.figures import checks

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


# --- saving ---------------------------------------------------------------------------------------------

def output_path(name: str, notebook: str, suffix: str) -> Path:
    """figures_dir()/<notebook>/<name><suffix>, rejecting names that would escape that folder."""
    for part in (name, notebook):
        if not _NAME.match(part) or part in {".", ".."}:
            raise ValueError(f"bad figure/notebook name {part!r}: use letters, digits, '_', '-', '.'")
    return figures_dir() / notebook / f"{name}{suffix}"


def save_figure(fig: Figure, name: str, notebook: str, dpi: int = 150) -> Path:
    """Save a matplotlib figure as PNG to figures_dir()/<notebook>/<name>.png, atomically, after warning of each
    of its `checks.figure_problems`."""
    path = output_path(name, notebook, ".png")
    checks.warn_problems(fig, f"{notebook}/{name}")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())
    return path


def save_plotly(fig: Any, name: str, notebook: str) -> Path:
    """Save a plotly figure as a self-contained HTML file (plotly.js inlined), atomically."""
    path = output_path(name, notebook, ".html")
    atomic_write_text(path, fig.to_html(include_plotlyjs=True, full_html=True))
    return path


def save_json(obj: Any, name: str, notebook: str) -> Path:
    """Save `obj` as pretty JSON to figures_dir()/<notebook>/<name>.json, atomically."""
    path = output_path(name, notebook, ".json")
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")
    return path


def png(fig: Figure, dpi: int = 80) -> bytes:
    """The figure as PNG bytes (for an ipywidgets Image; one draw, no tight bbox); the figure is closed."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def save_csv(frame: pd.DataFrame, name: str, notebook: str) -> Path:
    """Save a table as CSV to figures_dir()/<notebook>/<name>.csv, atomically."""
    path = output_path(name, notebook, ".csv")
    atomic_write_text(path, frame.to_csv(index=False))
    return path

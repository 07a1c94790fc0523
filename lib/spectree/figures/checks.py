"""What makes a saved figure unreadable, found on the drawn figure itself: a text reading "nan", a legend box over
plotted data, a shape no page can show. `save_figure` runs `figure_problems` on every figure it saves (a problem
is a `FigureProblem` warning, so a long run finishes; tests/figures/test_figure_checks.py turns them into
failures), and the figure modules place legends with `legend_outside` so that none covers data."""
from __future__ import annotations

import re
import warnings
from typing import Any, Iterator

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import Collection, QuadMesh
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from matplotlib.transforms import Bbox

MAX_ASPECT = 3.0  # a figure wider than 3:1 (or taller than 1:3) is a strip no page shows legibly
NAN_TEXT = re.compile(r"(?<![A-Za-z])nan(?![A-Za-z])", re.I)
SEGMENT_SAMPLES = 24  # points sampled along each drawn line segment


class FigureProblem(UserWarning):
    """A saved figure a reader could not read (`figure_problems`)."""


def legend_outside(ax: Axes, where: str = "right", **kwargs: Any) -> Legend | None:
    """Move `ax`'s legend (seaborn's or matplotlib's) outside the axes: to the right ('right') or under the x label
    ('below', in columns); None where the axes have no legend entries."""
    handles, labels = ax.get_legend_handles_labels()
    if ax.get_legend() is not None:  # seaborn's legends hold handles that get_legend_handles_labels may not
        old = ax.get_legend()
        handles, labels, title = old.legend_handles, [t.get_text() for t in old.get_texts()], old.get_title().get_text()
        kwargs.setdefault("title", title or None)
        old.remove()
    if not handles:
        return None
    kwargs.setdefault("fontsize", 8)
    if where == "below":
        kwargs.setdefault("ncol", min(len(handles), 4))
        return ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.18), frameon=False, **kwargs)
    return ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kwargs)


def _texts(fig: Figure) -> Iterator[str]:
    for artist in fig.findobj(Text):
        if artist.get_visible() and artist.get_text():
            yield artist.get_text()


def _legends(fig: Figure) -> Iterator[Legend]:
    yield from (legend for legend in fig.legends if legend.get_visible())
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            yield legend


def _data_points(ax: Axes) -> np.ndarray:
    """Display coordinates [k, 2] of what `ax` plots: points along every line (reference lines included), the
    centres of scatter points, the corners and centre of every bar (a span across the whole axes excepted)."""
    out = []
    for line in ax.lines:
        if not line.get_visible() or not isinstance(line, Line2D):
            continue
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
        xy = xy[np.isfinite(xy).all(1)]
        if len(xy) > 1 and line.get_linestyle() not in ("None", "none", "", " "):
            t = np.linspace(0, 1, SEGMENT_SAMPLES)[:, None, None]
            xy = (xy[:-1] * (1 - t) + xy[1:] * t).reshape(-1, 2)
        out.append(xy)
    for coll in ax.collections:
        if not coll.get_visible() or isinstance(coll, QuadMesh) or not isinstance(coll, Collection):
            continue
        offsets = np.asarray(coll.get_offsets(), dtype=float)
        if len(offsets) and not (len(offsets) == 1 and np.allclose(offsets, 0)):
            out.append(coll.get_offset_transform().transform(offsets))
    box = ax.get_window_extent()
    for patch in ax.patches:
        if not patch.get_visible() or not isinstance(patch, Rectangle):
            continue
        ext = patch.get_window_extent()
        if ext.width >= 0.98 * box.width or ext.height >= 0.98 * box.height or ext.width * ext.height == 0:
            continue  # a background span, or an empty bar
        out.append(np.array([[ext.x0, ext.y0], [ext.x1, ext.y1], [ext.x0, ext.y1], [ext.x1, ext.y0],
                             [(ext.x0 + ext.x1) / 2, (ext.y0 + ext.y1) / 2]]))
    points = np.concatenate(out) if out else np.zeros((0, 2))
    points = points[np.isfinite(points).all(1)]
    return points[(points[:, 0] >= box.x0) & (points[:, 0] <= box.x1) & (points[:, 1] >= box.y0)
                  & (points[:, 1] <= box.y1)]  # what the axes clip is not drawn


def _covered(box: Bbox, points: np.ndarray) -> int:
    return int(((points[:, 0] > box.x0) & (points[:, 0] < box.x1) & (points[:, 1] > box.y0)
                & (points[:, 1] < box.y1)).sum())


def figure_problems(fig: Figure, max_aspect: float = MAX_ASPECT) -> list[str]:
    """What keeps a reader from reading `fig`, as lines ([] when nothing does): a visible text reading "nan", a
    legend whose box covers plotted data (lines, scatter points, bars of any axes), a tight bounding box wider than
    `max_aspect`:1 or taller than 1:`max_aspect`. Draws the figure once."""
    if fig.canvas is None or not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = [f"text reads nan: {text!r}" for text in _texts(fig) if NAN_TEXT.search(text)]
    for legend in _legends(fig):
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            if ax.get_visible() and ax.get_window_extent().overlaps(box):
                hidden = _covered(box, _data_points(ax))
                if hidden:
                    title = ax.get_title() or ax.get_xlabel() or "an axes"
                    problems.append(f"a legend covers {hidden} plotted points of {title!r}")
    tight = fig.get_tightbbox(renderer)
    if tight is not None and tight.height > 0 and tight.width > 0:
        ratio = tight.width / tight.height
        if ratio > max_aspect or ratio < 1 / max_aspect:
            problems.append(f"aspect {tight.width:.1f} × {tight.height:.1f} in: beyond {max_aspect:g}:1")
    return problems


def warn_problems(fig: Figure, name: str) -> list[str]:
    """`figure_problems` of a figure about to be saved as `name`, each as a FigureProblem warning."""
    problems = figure_problems(fig)
    for problem in problems:
        warnings.warn(f"figure {name}: {problem}", FigureProblem, stacklevel=3)
    return problems

"""RESULTS.md shows the paper figures the notebooks reproduce (`reports.result_figures`): the repository's file shows
the compact copies its own run wrote into the tracked figures/results/ (each ≤ 150 KB, all ≤ 4 MB), each with the
paper's reading and ours computed from the notebook's summary.json, and links nothing the repository does not hold;
a figure the run did not produce is one line. Real matplotlib figures saved by `save_figure` in a temporary
SPECTREE_HOME; the registry is checked against the notebooks' own `save_figure` calls."""
import io
import json
import re
import subprocess
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from spectree.reports import result_figures as rf  # noqa: E402
from spectree.reports import results  # noqa: E402
from spectree.figures import save_figure  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RUN = {"profile": "default", "commit": "abc1234", "date": "2000-01-01 00:00 UTC", "host": "Test CPU"}
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(text: str) -> list[str]:
    """Every link and image target of a markdown text that is not a URL or an anchor."""
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:|#", t)]


def plain_figure(dpi: int = 40) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(np.arange(10), np.arange(10) ** 0.5, marker="o")
    ax.set(title="a small figure", xlabel="x", ylabel="y")
    fig.set_dpi(dpi)
    return fig


def stem_of(entry: rf.ResultFigure) -> str:
    return entry.stem.replace("*", "0.0")


@pytest.fixture
def workbook(tmp_path, monkeypatch) -> Path:
    """Every registry notebook with a summary (one claim named with each of the registry's keys, `ours` a number
    of this test) and each registry figure, as save_figure writes it."""
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    fig = plain_figure()
    first = save_figure(fig, stem_of(rf.REGISTRY[0]), rf.REGISTRY[0].notebook, dpi=40)
    plt.close(fig)
    for entry in rf.REGISTRY[1:]:  # the same picture under every registry name
        (tmp_path / "figures" / entry.notebook).mkdir(parents=True, exist_ok=True)
        (tmp_path / "figures" / entry.notebook / f"{stem_of(entry)}.png").write_bytes(first.read_bytes())
    for notebook in {e.notebook for e in rf.REGISTRY}:
        summary = {"claims": [{"name": f"{notebook}: EDD Fig. 3b, a claim",
                               "ours": f"τ {len(notebook) / 7:.4f}", "verdict": "holds", "kind": "paper"}],
                   "pair": "p", "strategy": "kary", "tokens": 3, "tau": 1.5, "gamma": 4.0, "lossless": True}
        (tmp_path / "figures" / notebook / "summary.json").write_text(json.dumps(summary))
    return tmp_path


def rows() -> list[dict]:
    notebooks = sorted({e.notebook for e in rf.REGISTRY})
    return [{"notebook": f"{n}.ipynb", "status": "ran", "seconds": 3.0} for n in notebooks]


def test_every_registry_figure_is_one_its_notebook_saves():
    """Each entry names a PNG its notebook saves (a literal name, or an f-string's pattern for a `*` stem), and at
    least 20 are paper figures, each with the paper's reading."""
    for entry in rf.REGISTRY:
        saved = rf.saved_names(ROOT / "notebooks" / f"{entry.notebook}.ipynb")
        name = entry.stem.replace("*", "0.0")
        assert any(p.fullmatch(name) for p in saved), f"{entry.notebook} saves no figure {entry.stem!r}"
        assert entry.says and len(entry.says) < 300
    assert len([e for e in rf.REGISTRY if e.paper != "—"]) >= 20
    assert len({(e.notebook, e.stem) for e in rf.REGISTRY}) == len(rf.REGISTRY)


def test_saved_names_read_literals_fstrings_and_variables(tmp_path):
    """The parser the check above relies on: a renamed figure no longer matches."""
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": ["%matplotlib inline\n", "figures.save_figure(ax.figure, \"tree_v2\", NOTEBOOK)\n",
                       "save_figure(fig, f\"speedup_T{temp}\", NOTEBOOK)\n", "save_figure(fig, name=n, notebook=NB)\n"]}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    saved = rf.saved_names(path)
    assert [p.pattern for p in saved] == ["tree_v2", "speedup_T.+", ".+"]
    assert not saved[0].fullmatch("tree") and saved[1].fullmatch("speedup_T0.6")


def test_the_root_results_show_every_figure_inline_with_its_captions(workbook):
    """The default run's RESULTS.md: ≥ 20 images, each a copy in figures/results/ that exists, under its notebook,
    with the paper's reading and ours (the summary's claim, its number and verdict); every relative link resolves
    under the workbook; figures/RESULTS.md shows the notebooks' own files."""
    written, others = results.write_results(rows(), "default", RUN)
    assert others == [] and workbook / "RESULTS.md" in written
    root = (workbook / "RESULTS.md").read_text()
    images = re.findall(r"^!\[[^\]]*\]\((figures/results/[^)]+\.png)\)$", root, re.M)
    assert len(images) == len(rf.REGISTRY) >= 20
    assert sorted(images) == sorted(f"figures/results/{p.name}" for p in (workbook / "figures" / "results").glob("*.png"))
    for target in relative_links(root):
        assert (workbook / target).is_file(), target
        assert "report.html" not in target
    for entry in rf.REGISTRY:
        section = root.split(f"## {entry.notebook}\n")[1].split("\n## ")[0]
        name = rf.copy_name(entry, Path(f"{stem_of(entry)}.png"))
        lines = section.splitlines()
        at = lines.index(next(line for line in lines if line.endswith(f"(figures/results/{name})")))
        caption = lines[at + 2]
        assert entry.says in caption and "*This run*" in caption, caption
        if entry.paper != "—":
            assert caption.startswith(f"**{entry.paper}**")
    claim = root.split("## 05_calibration\n")[1]
    assert f"τ {len('05_calibration') / 7:.4f} (**holds**)" in claim  # ours: the summary's number, never typed
    assert "- figures: " in root.split("\n## ")[0]
    local = (workbook / "figures" / "RESULTS.md").read_text()
    assert "![EDD Fig. 3b](05_calibration/reliability.png)" in local.splitlines()
    assert all((workbook / "figures" / t).is_file() for t in relative_links(local))


def test_a_missing_figure_or_number_is_one_line_and_a_stale_copy_goes(workbook):
    results.write_results(rows(), "default", RUN)
    (workbook / "figures" / "05_calibration" / "reliability.png").unlink()
    (workbook / "figures" / "08_classifier_surfaces" / "summary.json").write_text(json.dumps({"claims": []}))
    results.write_results(rows(), "default", RUN)
    root = (workbook / "RESULTS.md").read_text()
    assert "*EDD Fig. 3b*: figure `reliability` not produced by this run." in root.splitlines()
    assert not (workbook / "figures" / "results" / "05_calibration-reliability.png").exists()
    assert "*This run*: not in this run's summary.json" in root.split("## 08_classifier_surfaces")[1]


def heavy_figures() -> list[plt.Figure]:
    """Figures like the notebooks' largest: a wide five-panel bar chart, four heatmaps, a 3-D scatter, and noise."""
    rng = np.random.default_rng(0)
    wide, axes = plt.subplots(1, 5, figsize=(26, 5))
    for ax in axes:
        ax.bar(np.arange(10), rng.random(10))
        ax.set_title("reliability")
    heat, axes = plt.subplots(2, 2, figsize=(17, 8.6))
    for ax in axes.flat:
        ax.figure.colorbar(ax.imshow(rng.random((7, 20)), aspect="auto", cmap="viridis"), ax=ax)
    scatter = plt.figure(figsize=(5, 4.3))
    ax = scatter.add_subplot(projection="3d")
    ax.scatter(*rng.random((3, 1000)), c=rng.random(1000), s=4)
    noise, ax = plt.subplots(figsize=(7, 5))
    ax.imshow(rng.random((600, 800, 3)))  # a pixel of noise per pixel: no palette PNG of it fits at full size
    return [wide, heat, scatter, noise]


def test_compact_copies_fit_a_repository_page(tmp_path, monkeypatch):
    """Real matplotlib figures at save_figure's 150 dpi: each copy ≤ 150 KB (noise too), at most 1000 px wide (1600
    when wide), a palette PNG; `write_copies` shares TOTAL_BYTES among the copies, so a registry of 100 keeps even
    the 3-D scatter (≈ 60 KB at full budget) within 4 MB / 100."""
    from PIL import Image

    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    sources = []
    for i, fig in enumerate(heavy_figures()):
        sources.append(save_figure(fig, f"heavy{i}", "00_quickstart"))
        plt.close(fig)
    for source in sources:
        data = rf.compact_png(source)
        copy = tmp_path / f"{source.stem}.small.png"
        copy.write_bytes(data)
        with Image.open(copy) as image, Image.open(source) as original:
            wide = original.width >= rf.WIDE_ASPECT * original.height
            assert image.mode == "P" and image.width <= (rf.WIDE if wide else rf.WIDTH)
        assert len(data) <= rf.MAX_BYTES, (source, len(data))
    assert Image.open(io.BytesIO(rf.compact_png(sources[3]))).width < rf.WIDTH  # the noise had to shrink
    scatter = sources[2]
    assert len(rf.compact_png(scatter)) > rf.TOTAL_BYTES // 100  # so the budget below binds
    fig = plain_figure(dpi=20)
    save_figure(fig, "tiny", "00_quickstart", dpi=20)
    plt.close(fig)
    monkeypatch.setattr(rf, "REGISTRY", (rf.ResultFigure("00_quickstart", scatter.stem, "X", "x", rf.claims("x")),)
                        + (rf.ResultFigure("00_quickstart", "tiny", "X", "x", rf.claims("x")),) * 99)
    written = rf.write_copies(["00_quickstart"])
    assert len(written) == 100 and {p.name for p in (tmp_path / "figures" / "results").iterdir()} == \
        {"00_quickstart-heavy2.png", "00_quickstart-tiny.png"}
    assert max(p.stat().st_size for p in written) <= rf.TOTAL_BYTES // 100


def test_the_results_folder_is_tracked_and_the_reports_are_not():
    """.gitignore keeps figures/* out of git but lets figures/results/ (RESULTS.md's figures) in."""
    try:
        ignored = subprocess.run(["git", "check-ignore", "figures/results/04_entropy_rank-entropy_rank.png",
                                  "figures/04_entropy_rank/report.html", "figures/04_entropy_rank/entropy_rank.png"],
                                 cwd=ROOT, capture_output=True, text=True, timeout=30)
    except OSError as err:
        pytest.skip(f"no git ({err})")
    if ignored.returncode == 128:
        pytest.skip("not a git checkout")
    assert ignored.stdout.split() == ["figures/04_entropy_rank/report.html", "figures/04_entropy_rank/entropy_rank.png"]


def test_the_repository_results_show_its_own_figures_and_link_only_what_it_holds():
    """The committed RESULTS.md (written by a default run): ≥ 20 inline figures, and every relative link or image
    is a file git tracks (no report.html, which figures/* keeps out of the repository)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"not a git checkout ({err})")
    tracked = set(listed.stdout.decode().split("\0"))
    text = (ROOT / "RESULTS.md").read_text()
    untracked = [t for t in relative_links(text) if t.split("#")[0] not in tracked]
    assert not untracked, f"RESULTS.md links files the repository does not hold: {untracked[:5]}"
    assert len(re.findall(r"^!\[[^\]]*\]\(figures/results/[^)]+\.png\)$", text, re.M)) >= 20

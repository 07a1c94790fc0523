"""The README's pictures, figures/gallery/, from the run that wrote RESULTS.md: `python -m spectree.reports.gallery`
after a default run (`./run_all.sh`), on the same commit. It copies notebook 00's tree and mask of that run
(compact, as RESULTS.md's figures), screenshots that run's figures/index.html in headless Chromium, runs the
JupyterLab browser test with SPECTREE_SCREENSHOT_DIR (the explorer in a real JupyterLab, with its notifications off,
`quiet_lab_settings`, shot once fully drawn, `wait_drawn`: tests/explorer/test_jupyterlab.py) and writes figures/gallery/STAMP: RESULTS.md's commit and each picture's sha256.
`stamp_problems` says what keeps the gallery from being RESULTS.md's (tests/reports/test_gallery.py reads it on the
repository: README's pictures are never older than RESULTS.md).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from spectree.core.errors import SpectreeError
from spectree.core.paths import atomic_write_bytes, atomic_write_text, figures_dir, home
from spectree.reports.result_figures import compact_png
from spectree.reports.results import REFERENCE_PROFILE, git_commit, load_run

GALLERY, STAMP = "gallery", "STAMP"  # figures/gallery/, figures/gallery/STAMP
COPIES = {"quickstart_tree.png": ("00_quickstart", "tree.png"),
          "quickstart_tree_mask.png": ("00_quickstart", "tree_mask.png")}  # gallery name: (notebook, its figure)
INDEX_SHOT, EXPLORER_SHOT = "index_page.png", "explorer_jupyterlab.png"
VIEWPORT = {"width": 1280, "height": 900}
# JupyterLab's notifications off for a screenshot: no "fetch official Jupyter news?" toast, no update check
LAB_NOTIFICATIONS = {"fetchNews": "false", "checkForUpdates": False, "doNotDisturbMode": True}
# a page is fully drawn when every image has decoded, no plotly graph is still without its SVG, and the kernel idles
DRAWN = """() => {
  const images = [...document.querySelectorAll('img')].every(i => i.complete && i.naturalWidth > 0);
  const plots = [...document.querySelectorAll('.js-plotly-plot')].every(p => p.querySelector('.main-svg'));
  const app = window.jupyterapp, w = app && app.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return images && plots && (!app || (k && k.status === 'idle'));
}"""
README_PICTURE = re.compile(r"\]\((figures/gallery/[^)\s]+)\)")


def commit_of(results_text: str) -> Optional[str]:
    """The short commit a RESULTS.md names on its "- commit:" line (without "(with uncommitted changes)")."""
    found = re.search(r"^- commit: ([0-9a-f]{4,})", results_text, re.M)
    return found.group(1) if found else None


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_stamp(folder: Path, commit: str) -> Path:
    """folder/STAMP: the commit of the RESULTS.md the pictures belong to, then "sha256  name" of each PNG."""
    lines = [f"commit: {commit}"] + [f"{sha256(p)}  {p.name}" for p in sorted(folder.glob("*.png"))]
    path = folder / STAMP
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def stamp_problems(root: Optional[Path] = None) -> list[str]:
    """What keeps README's pictures from being those of the run that wrote RESULTS.md ([] when nothing does): a
    picture README shows that is missing or not stamped, a stamp of another commit than RESULTS.md's, a picture
    changed since it was stamped."""
    root = root or home()
    readme, results, stamp = root / "README.md", root / "RESULTS.md", root / "figures" / GALLERY / STAMP
    if not stamp.is_file():
        return [f"no {stamp.relative_to(root)}: run `python -m spectree.reports.gallery` after the default run"]
    lines = stamp.read_text().splitlines()
    stamped = commit_of("- " + lines[0]) if lines else None
    wanted = commit_of(results.read_text()) if results.is_file() else None
    problems = [] if stamped and stamped == wanted else \
        [f"the gallery is stamped with commit {stamped}, RESULTS.md is from {wanted}"]
    hashes = {name: digest for digest, _, name in (line.partition("  ") for line in lines[1:])}
    pictures = README_PICTURE.findall(readme.read_text()) if readme.is_file() else []
    for link in pictures:
        if not (root / link).is_file():
            problems.append(f"README shows {link}, which does not exist")
        elif Path(link).name not in hashes:
            problems.append(f"README shows {link}, which the stamp does not list")
    problems += [f"figures/{GALLERY}/{p.name} is not stamped" for p in sorted(stamp.parent.glob("*.png"))
                 if p.name not in hashes]
    for name, digest in hashes.items():
        path = stamp.parent / name
        if not path.is_file() or sha256(path) != digest:
            problems.append(f"figures/{GALLERY}/{name} changed since it was stamped")
    return problems


def source_commit() -> str:
    """RESULTS.md's commit, once this checkout is at it and notebook 00's figures come from its default run."""
    path = home() / "RESULTS.md"
    commit = commit_of(path.read_text()) if path.is_file() else None
    head = (git_commit() or "").split(" ")[0]
    if commit is None or commit != head:
        raise SpectreeError(f"RESULTS.md is from commit {commit}, this checkout is at {head or 'no commit'}: the "
                            "gallery comes from the run that wrote RESULTS.md (./run_all.sh on this commit first)")
    run = load_run("00_quickstart")
    if (run.get("commit") or "").split(" ")[0] != commit or run.get("profile") != REFERENCE_PROFILE:
        raise SpectreeError(f"figures/00_quickstart is from {run.get('profile')} run of commit {run.get('commit')}, "
                            f"not the {REFERENCE_PROFILE} run of {commit} that wrote RESULTS.md")
    return commit


def quiet_lab_settings(settings_dir: Path) -> Path:
    """Write JupyterLab's user setting for notifications (LAB_NOTIFICATIONS) into `settings_dir` (the server's
    JUPYTERLAB_SETTINGS_DIR), so no news or update toast covers a screenshot; returns the settings file."""
    path = Path(settings_dir) / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(LAB_NOTIFICATIONS, indent=2) + "\n")
    return path


def wait_drawn(page, timeout_ms: int = 60_000) -> None:
    """Wait until `page` (playwright) is fully drawn (DRAWN), then two animation frames for the last paint."""
    page.wait_for_load_state("load")
    page.wait_for_function(DRAWN, timeout=timeout_ms)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def screenshot_index(dest: Path, chromium: str) -> Path:
    """The run's figures/index.html as the browser shows its first screen (VIEWPORT), network blocked, once it is
    fully drawn (`wait_drawn`)."""
    from playwright.sync_api import sync_playwright

    index = (figures_dir() / "index.html").resolve()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport=VIEWPORT)
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(("file:", "data:"))
                   else route.abort())
        page.goto(index.as_uri())
        wait_drawn(page)
        page.screenshot(path=str(dest))
        browser.close()
    return dest


def screenshot_explorer(folder: Path) -> Path:
    """The JupyterLab browser test with SPECTREE_SCREENSHOT_DIR=folder: its explorer screenshot, freshly taken."""
    dest, start = folder / EXPLORER_SHOT, time.time()
    test = home() / "tests" / "explorer" / "test_jupyterlab.py"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", str(test)],
                          cwd=home(), env={**os.environ, "SPECTREE_SCREENSHOT_DIR": str(folder)})
    if done.returncode != 0 or not dest.is_file() or dest.stat().st_mtime < start:
        raise SpectreeError(f"{test.name} did not pass or took no screenshot (exit status {done.returncode})")
    return dest


def main() -> int:
    commit = source_commit()
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SpectreeError("Debian chromium is needed for the screenshots (apt-get install chromium)")
    folder = figures_dir() / GALLERY
    folder.mkdir(parents=True, exist_ok=True)
    for name, (notebook, figure) in COPIES.items():
        atomic_write_bytes(folder / name, compact_png(figures_dir() / notebook / figure))
    screenshot_index(folder / INDEX_SHOT, chromium)
    screenshot_explorer(folder)
    stamp = write_stamp(folder, commit)
    print(f"gallery of commit {commit}: {', '.join(sorted(p.name for p in folder.glob('*.png')))}; stamp {stamp}")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except SpectreeError as err:
        print(f"gallery: error: {err}", file=sys.stderr)
        raise SystemExit(2)

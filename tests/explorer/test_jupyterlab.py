"""The explorer in a real JupyterLab: start a server on 127.0.0.1, run notebooks/10_explorer.ipynb (with the
quick profile's parameters injected by papermill) in headless Chromium, move the C2T β slider, and check
that the displayed τ and γ become what replay gives for that β. The server is stopped by its PID."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from spectree.reports.gallery import quiet_lab_settings, wait_drawn

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium")
BETA = 0.6  # above the opening 0.5 and the notebook's c2t_envelope_beta: C2T replays on its own logbook there

READ_NUMBERS = """() => {
  for (const t of document.querySelectorAll('.jp-OutputArea table')) {
    const th = [...t.querySelectorAll('th')].map(x => x.textContent.trim());
    const td = [...t.querySelectorAll('td')].map(x => x.textContent.trim());
    if (th.includes('τ') && th.includes('γ')) return {tau: td[th.indexOf('τ')], gamma: td[th.indexOf('γ')]};
  }
  return null;
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    """A JupyterLab server serving a parameterised copy of the explorer notebook; yields (base URL, token)."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run tries to)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    params = yaml.safe_load((ROOT / "params" / "quick.yaml").read_text())["10_explorer"]
    nb = parameterize_notebook(load_notebook_node(str(ROOT / "notebooks" / "10_explorer.ipynb")), params)
    nbformat.write(nb, str(tmp_path / "explorer.ipynb"))  # a copy: Lab's autosave never touches the repository
    port, token = free_port(), "spectree-test"
    env = {**os.environ, **{k: str(tmp_path / k.lower()) for k in (
        "JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR")}}
    quiet_lab_settings(Path(env["JUPYTERLAB_SETTINGS_DIR"]))  # no news / update toast over the screenshot
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}",
         "--ServerApp.allow_root=True", "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            assert proc.poll() is None, (tmp_path / "lab.log").read_text()
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        yield base, token, params
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def replay_numbers(params: dict, beta: float) -> dict:
    """τ and γ per target forward of C2T at this β on the logbook the notebook scores C2T on (C2T's own, at its
    c2t_envelope_beta: `explorer.explorer.c2t_logbook_of`, cached by the notebook's run), as the explorer formats
    them."""
    from spectree.replay.logbook import LogConfig, logbook_dir, logbook_tag, read_logbook
    from spectree.replay.replay import replay, summarize
    from spectree.explorer.explorer import c2t_logbook_of
    from spectree.runs.runner import notebook_parameters
    from spectree.strategies.c2t import C2T

    params = {**notebook_parameters(ROOT / "notebooks" / "10_explorer.ipynb"), **params}
    cfg = LogConfig(pair=params["pair"], max_new_tokens=params["max_new_tokens"],
                    **{k: params[k] for k in ("K", "d_max", "beam", "b_env", "d_env")})
    logbook = read_logbook(logbook_dir(cfg, logbook_tag(params["prompts"])))
    own = c2t_logbook_of(logbook, cfg, params["classifier"], params["c2t_envelope_beta"], params["depth"])
    policy = C2T(K=min(10, params["K"]), d_max=min(params["depth"], params["d_max"]), beta=beta, topk=0,
                 classifier=params["classifier"])  # the explorer's
    s = summarize(replay(own, policy))
    return {"tau": f"{s['tau']:.3f}", "gamma": f"{s['gamma']:.2f}"}


def test_moving_beta_in_jupyterlab_shows_the_replay_numbers(lab):
    from playwright.sync_api import sync_playwright

    base, token, params = lab
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith((base, "data:", "blob:"))
                   else route.abort())
        page.goto(f"{base}/lab/tree/explorer.ipynb?token={token}")
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=120_000)
        page.wait_for_function("() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
                               " const k = w && w.sessionContext.session && w.sessionContext.session.kernel;"
                               " return k && k.status === 'idle'; }", timeout=120_000)
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        slider = page.locator(".widget-slider", has_text="β (C2T)")
        slider.wait_for(timeout=600_000)
        page.wait_for_function(READ_NUMBERS, timeout=60_000)
        before = page.evaluate(READ_NUMBERS)
        readout = slider.locator(".widget-readout")
        readout.click()
        page.keyboard.press("Control+A")
        page.keyboard.type(str(BETA))
        page.keyboard.press("Enter")
        expected = replay_numbers(params, BETA)
        page.wait_for_function(f"() => {{ const v = ({READ_NUMBERS})(); return v && v.tau === '{expected['tau']}'"
                               f" && v.gamma === '{expected['gamma']}'; }}", timeout=60_000)
        after = page.evaluate(READ_NUMBERS)
        shots = os.environ.get("SPECTREE_SCREENSHOT_DIR")  # README gallery: SPECTREE_SCREENSHOT_DIR=figures/gallery
        if shots:
            slider.scroll_into_view_if_needed()
            wait_drawn(page)  # the plot redrawn for the new β, the kernel idle
            page.screenshot(path=str(Path(shots) / "explorer_jupyterlab.png"))
        browser.close()
    assert after == expected and after != before, (before, after, expected)

"""Reports are self-contained: an executed notebook with a plotly chart and a widget, exported by the runner's
exporter, draws both in headless Debian Chromium with every network request blocked."""
import re
import shutil
from pathlib import Path

import pytest

from spectree.reports import export
from spectree.runs.runner import export_html

CHROMIUM = shutil.which("chromium")
EXTERNAL_SCRIPT = re.compile(r"<script[^>]*\bsrc\s*=\s*[\"']?\s*(https?:)?//", re.IGNORECASE)


@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> Path:
    """A fixture notebook, executed by nbclient: one plotly express figure (the default renderer, i.e. the
    plotly mimetype) and one IntSlider whose state nbclient saves in the notebook's metadata."""
    import nbformat
    from nbclient import NotebookClient

    folder = tmp_path_factory.mktemp("report")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# browser fixture"),
        nbformat.v4.new_code_cell("import plotly.express as px\n"
                                  "px.scatter(x=[1, 2, 3], y=[4, 1, 7], title='fixture chart')"),
        nbformat.v4.new_code_cell("import ipywidgets\n"
                                  "ipywidgets.IntSlider(value=7, min=0, max=10, description='beta')"),
    ]
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    path = folder / "fixture.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_executed_notebook_keeps_the_plotly_mimetype_and_the_widget_state(executed):
    import nbformat

    nb = nbformat.read(str(executed), as_version=4)
    mimes = [set(o.get("data", {})) for c in nb.cells for o in c.get("outputs", [])]
    assert any(export.PLOTLY_MIME in m for m in mimes)
    assert any(export.WIDGET_VIEW_MIME in m for m in mimes)
    state = nb.metadata["widgets"][export.WIDGET_STATE_MIME]["state"]
    assert any(s["model_name"] == "IntSliderModel" and s["state"]["value"] == 7 for s in state.values())


def test_export_without_embed_js_still_works_and_says_so(executed, tmp_path):
    body, info = export.export_report(executed, use_widgets=False)
    assert info["plotly"] == 1 and info["widget_views"] == 0 and info["widgets_as_text"] == 1
    assert "Report export notes" in body and "shown as text" in body
    assert "IntSlider(value=7" in body
    assert export.WIDGET_VIEW_MIME not in body and "spectree-widget-embed" not in body
    assert not EXTERNAL_SCRIPT.search(body)


def test_widget_view_without_saved_state_falls_back_to_text(executed, tmp_path):
    import nbformat

    nb = nbformat.read(str(executed), as_version=4)
    del nb.metadata["widgets"]  # e.g. a progress bar closed before the notebook ended
    stateless = tmp_path / "stateless.ipynb"
    nbformat.write(nb, str(stateless))
    body, info = export.export_report(stateless, embed_js=Path(__file__))  # any path: it is not inlined
    assert info["widget_views"] == 0 and info["widgets_as_text"] == 1
    assert "no state" in body and "IntSlider(value=7" in body and "spectree-widget-embed" not in body


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed (apt-get install chromium)")
def test_report_draws_chart_and_widget_offline(executed, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    assert export.find_embed_js() is not None, (
        f"embed.js missing: {export.FETCH_SCRIPT} could not fetch @jupyter-widgets/html-manager from npm")
    report = tmp_path / "report.html"
    info = export_html(executed, report)
    body = report.read_text()
    assert info["plotly"] == 1 and info["widget_views"] == 1 and not info["notes"]
    assert not EXTERNAL_SCRIPT.search(body), "a report must not load scripts from the network"
    assert body.count(export.plotly_js()[:2000]) == 1, "plotly.js inlined exactly once"

    network, errors = [], []

    def block(route):
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            network.append(route.request.url)
            route.abort()

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            context = browser.new_context()
            context.route("**/*", block)
            page = context.new_page()
            page.on("request", lambda r: network.append(r.url)
                    if not r.url.startswith(("file:", "data:", "blob:")) else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(report.as_uri(), wait_until="load")

            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=20_000)
            assert page.locator(".js-plotly-plot .scatterlayer .trace").count() == 1
            assert page.locator(".js-plotly-plot .scatterlayer .point").count() == 3
            assert "fixture chart" in page.locator(".js-plotly-plot .gtitle").text_content()

            slider = page.locator(".widget-slider")
            slider.first.wait_for(timeout=20_000)
            assert slider.locator(".widget-label").first.inner_text() == "beta"
            assert slider.locator(".widget-readout").first.inner_text().strip() == "7"
        finally:
            browser.close()
    assert network == [], f"network requests attempted: {network}"
    assert errors == [], f"page errors: {errors}"

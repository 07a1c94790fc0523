"""Self-contained HTML reports that work offline: nbconvert's lab template, without its CDN scripts.

Stock `nbconvert --to html` drops plotly's mimetype outputs (`application/vnd.plotly.v1+json`, what the
notebooks' default plotly renderer emits), and loads require.js, MathJax and the widget manager from CDNs,
so charts and widgets vanish offline. Here, at export time:

- `SelfContainedPreprocessor` turns every plotly mimetype output into an HTML div drawn by plotly.js, which
  the template inlines once per report (from the plotly package: `plotly.offline.get_plotlyjs()`);
- widget views are drawn from the widget state that papermill/nbclient stores in the executed notebook
  (`metadata.widgets`), by @jupyter-widgets/html-manager's standalone `dist/embed.js`, inlined and started
  from a Blob URL (webpack's automatic publicPath needs a script with a `src`; its Font Awesome fonts are
  inlined as data URLs). embed.js is fetched at set-up by `scripts/fetch_widget_embed.sh` into
  data/cache/npm/ (ignored). Without it, or for a view whose model has no saved state (a closed progress
  bar), the output falls back to its text form, and a note at the top of the report says so;
- require.js, MathJax and mermaid are not loaded (the notebooks have no LaTeX or mermaid: such cells show
  their source), and any remaining `<script src="http...">` (from a `text/html` output) is removed with a
  note, so a report never reaches the network.
"""
from __future__ import annotations

import base64
import html
import re
import subprocess
from pathlib import Path
from typing import Any

from spectree.core.paths import home

PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"
HTML_MANAGER_VERSION = "1.0.15"  # keep equal to VERSION in scripts/fetch_widget_embed.sh
FETCH_SCRIPT = "scripts/fetch_widget_embed.sh"

_TEMPLATE = r"""
{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}
{%- if resources.spectree.plotly_js %}
<script type="text/javascript">window.PlotlyConfig = {MathJaxConfig: 'local'};</script>
<script type="text/javascript">{{ resources.spectree.plotly_js }}</script>
{%- endif %}
{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block footer_js -%}
{%- if resources.spectree.embed_js %}
<script type="text/x-spectree-widget-embed" id="spectree-widget-embed">{{ resources.spectree.embed_js }}</script>
<script type="text/javascript">
(function () {
  // Start embed.js from a Blob URL while the page is still parsing, so that the window's load event (on
  // which it renders every widget view from the saved state) waits for it.
  var code = document.getElementById("spectree-widget-embed").textContent;
  var script = document.createElement("script");
  script.src = URL.createObjectURL(new Blob([code], {type: "text/javascript"}));
  document.body.appendChild(script);
}());
</script>
{%- endif %}
{%- endblock footer_js -%}
"""

_EXTERNAL_SCRIPT = re.compile(r"""<script\b[^>]*\bsrc\s*=\s*["']?\s*((?:https?:)?//[^"'\s>]*)[^>]*>\s*</script\s*>""",
                              re.IGNORECASE)
_FONT_REF = re.compile(r"""\b[A-Za-z_$][\w$]*\.p\+"([0-9a-f]{16,}\.(?:woff2|woff|ttf|eot|svg))\"""")
_embed_cache: dict[Path, str | None] = {}
_fetch_tried = False


def embed_js_dir() -> Path:
    return home() / "data" / "cache" / "npm" / f"html-manager-{HTML_MANAGER_VERSION}" / "dist"


def find_embed_js(fetch: bool = True) -> Path | None:
    """The cached embed.js, running the fetch script once per process when it is missing (and `fetch`)."""
    global _fetch_tried
    path = embed_js_dir() / "embed.js"
    if not path.exists() and fetch and not _fetch_tried:
        _fetch_tried = True
        script = home() / FETCH_SCRIPT
        if script.exists():
            try:
                subprocess.run(["bash", str(script)], cwd=home(), timeout=240, check=False)
            except (OSError, subprocess.TimeoutExpired):
                pass
    return path if path.exists() else None


def embed_js_source(path: Path) -> str:
    """embed.js ready to run from a Blob URL: its fonts (loaded relative to the script) become data URLs —
    woff2, which every current browser takes first, inlined; the older formats emptied."""
    if path not in _embed_cache:
        code = path.read_text(encoding="utf-8")

        def inline(match: re.Match) -> str:
            name = match.group(1)
            font = path.parent / name
            if name.endswith(".woff2") and font.exists():
                return '"data:font/woff2;base64,' + base64.b64encode(font.read_bytes()).decode() + '"'
            return '"data:,"'

        code = _FONT_REF.sub(inline, code)
        if re.search(r"</script|<!--", code, re.IGNORECASE):  # cannot sit inside a <script> element
            code = re.sub(r"</(script)", r"<\\/\1", code, flags=re.IGNORECASE).replace("<!--", "<\\!--")
        _embed_cache[path] = code
    return _embed_cache[path]


def plotly_js() -> str:
    import plotly.offline

    return plotly.offline.get_plotlyjs()


def _preprocessor_class():
    from nbconvert.preprocessors import Preprocessor
    from traitlets import Unicode

    class SelfContainedPreprocessor(Preprocessor):
        """Plotly mimetype → HTML div (plotly.js inlined once by the template); widget views kept only where
        they can be drawn offline (embed.js present, model in the saved state), else their text form."""

        embed_js_path = Unicode("", help="embed.js to inline; empty: widgets as text").tag(config=True)

        def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
            import plotly.io as pio

            state = nb.metadata.get("widgets", {}).get(WIDGET_STATE_MIME, {}).get("state", {})
            info = resources.setdefault("spectree", {})
            info.update(plotly=0, widget_views=0, widgets_as_text=0, plotly_js="", embed_js="")
            for ci, cell in enumerate(nb.cells):
                for oi, output in enumerate(cell.get("outputs", [])):
                    data = output.get("data")
                    if not data:
                        continue
                    if PLOTLY_MIME in data:
                        figure = data.pop(PLOTLY_MIME)
                        data["text/html"] = pio.to_html(figure, include_plotlyjs=False, full_html=False,
                                                        validate=False, div_id=f"plotly-{ci}-{oi}",
                                                        default_width="100%", default_height="525px",
                                                        config={"responsive": True})
                        info["plotly"] += 1
                    if WIDGET_VIEW_MIME in data:
                        model = data[WIDGET_VIEW_MIME].get("model_id")
                        if self.embed_js_path and model in state:
                            info["widget_views"] += 1
                        else:
                            data.pop(WIDGET_VIEW_MIME)
                            data.setdefault("text/plain", "[widget]")
                            info["widgets_as_text"] += 1
            # the template inlines plotly.js only if a chart needs it, embed.js only if a widget view does
            if info["plotly"]:
                info["plotly_js"] = plotly_js()
            if info["widget_views"]:
                info["embed_js"] = embed_js_source(Path(self.embed_js_path))
            else:
                nb.metadata.pop("widgets", None)  # nothing to draw: no state blob in the page
            return nb, resources

    return SelfContainedPreprocessor


def _notes_html(notes: list[str]) -> str:
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    return (f'<aside class="spectree-export-notes" style="border:1px solid #d0a000;background:#fff8e0;'
            f'padding:0.5em 1em;margin:1em;font-family:sans-serif;font-size:13px">'
            f"<strong>Report export notes</strong><ul>{items}</ul></aside>")


def export_report(executed: Path, fetch: bool = True, embed_js: Path | None = None,
                  use_widgets: bool = True) -> tuple[str, dict]:
    """The executed notebook as one self-contained HTML page, and what the export did
    (`plotly`, `widget_views`, `widgets_as_text` counts, `embed_js` path or None, `notes`)."""
    import nbformat
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    embed = (embed_js or find_embed_js(fetch)) if use_widgets else None
    exporter = HTMLExporter(template_name="lab", embed_images=True,
                            extra_loaders=[DictLoader({"spectree_offline.html.j2": _TEMPLATE})],
                            template_file="spectree_offline.html.j2")
    exporter.register_preprocessor(_preprocessor_class()(embed_js_path=str(embed or "")), enabled=True)
    nb = nbformat.read(str(executed), as_version=4)
    body, resources = exporter.from_notebook_node(nb, resources={"metadata": {"name": Path(executed).stem}})
    info = {k: v for k, v in resources["spectree"].items() if not k.endswith("_js")}

    notes = []
    if info["widgets_as_text"]:
        if embed is None:
            notes.append(f"{info['widgets_as_text']} widget output(s) shown as text: the offline widget renderer "
                         f"(@jupyter-widgets/html-manager {HTML_MANAGER_VERSION} embed.js) is not in "
                         f"data/cache/npm/; run {FETCH_SCRIPT} and export again.")
        else:
            notes.append(f"{info['widgets_as_text']} widget output(s) shown as text: the notebook saved no state "
                         f"for them (e.g. a progress bar closed when it finished).")
    removed = [m.group(1) for m in _EXTERNAL_SCRIPT.finditer(body)]
    if removed:
        body = _EXTERNAL_SCRIPT.sub(lambda m: f"<!-- spectree export: removed external script "
                                              f"{html.escape(m.group(1))} -->", body)
        notes.append("removed external script(s) that would need the network: " + ", ".join(removed))
    if notes:
        body = body.replace("<main>", "<main>" + _notes_html(notes), 1)
    return body, {**info, "embed_js": str(embed) if embed else None, "notes": notes}

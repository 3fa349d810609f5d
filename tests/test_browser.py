"""`make lab` in a real browser: JupyterLab from this venv, driven by headless Debian chromium.

The explorer notebook is run cell by cell in the browser, two of its controls are moved, and the
stats table and tile map it shows must be exactly what :mod:`svgtpu.explore` computes for those
settings.  Every other notebook must open with the project's kernel and run its parameters cell
without an error.  Screenshots go to ``build/browser/``.

Nothing downloads a browser: Playwright (pip) drives the system's ``/usr/bin/chromium``
(``apt-get install -y chromium``; ``.ci/run`` installs it).  Deselect with ``-m "not browser"``.
Without chromium the test skips locally and fails in CI (``CI=true``).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from svgtpu import explore
from svgtpu.report import reproduce
from svgtpu.setting import Setting

# one worker runs the file (make test: --dist loadgroup): one JupyterLab and one chromium for all of its tests
pytestmark = [pytest.mark.system, pytest.mark.browser, pytest.mark.xdist_group("browser")]

REPO = Path(__file__).resolve().parents[1]
SHOTS = REPO / "build" / "browser"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: The settings the explorer notebook's parameters cell starts from.
START = explore.Settings(Setting(resolution="1440p", kept=0.3, block_q=3024, block_kv=2048, device="v6e", chips=8))
TRACEBACK = "Traceback (most recent call last)"
#: The notebook on screen (JupyterLab keeps other tabs in the DOM, hidden).
SHOWN = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing in CI: .ci/run must `apt-get install -y chromium` before `make test`")
        pytest.skip("no chromium on this machine (apt-get install -y chromium); CI installs it and runs this test")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on a copy of notebooks/ (so autosave never touches the committed ones), with the
    project's kernel name (`make install` registers `svgtpu`) pointing at this interpreter."""
    chromium = _chromium()
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "notebooks"
    shutil.copytree(REPO / "notebooks", root)
    spec = tmp / "jupyter" / "kernels" / "svgtpu"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "svgtpu (.venv)", "language": "python"}))
    settings = tmp / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)   # no news / update checks: nothing may reach the network
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false",
                                                                          "checkForUpdates": False}))
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_PATH": str(tmp / "jupyter"), "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"), "JAX_PLATFORMS": "cpu"}
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")   # CI containers run as root
    log = (tmp / "server.log").open("w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, f"jupyter lab exited: {(tmp / 'server.log').read_text()[-2000:]}"
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, "jupyter lab did not answer within 90 s"
                time.sleep(0.5)
        yield {"url": f"http://127.0.0.1:{port}", "token": token, "root": root, "chromium": chromium}
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="module")
def page(lab, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=lab["chromium"], headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": 1500, "height": 1900})
        context.set_default_timeout(60_000)
        yield context.pages[0] if context.pages else context.new_page()
        context.close()


def _open(page, lab, notebook: str) -> nbformat.NotebookNode:
    """Open ``notebook`` and wait until all its cells are drawn and its kernel is idle."""
    nb = nbformat.read(lab["root"] / f"{notebook}.ipynb", as_version=4)
    # ?reset: a fresh workspace, so the notebooks opened before are not restored (nor their kernels)
    page.goto(f"{lab['url']}/lab/tree/{notebook}.ipynb?reset&token={lab['token']}")
    page.wait_for_function(
        f"n => document.querySelectorAll('{SHOWN} .jp-Cell').length == n"
        " && document.body.innerText.includes('svgtpu (.venv) | Idle')", arg=len(nb.cells), timeout=90_000)
    return nb


def _shut_down_kernels(lab) -> None:
    """Stop the kernels a test started (the server would keep them running)."""
    api = f"{lab['url']}/api/sessions"
    headers = {"Authorization": f"token {lab['token']}"}
    with urllib.request.urlopen(urllib.request.Request(api, headers=headers)) as answer:
        sessions = json.load(answer)
    for session in sessions:
        urllib.request.urlopen(urllib.request.Request(f"{api}/{session['id']}", headers=headers, method="DELETE"))


def _run_cells(page, nb, upto: int) -> None:
    """Run cells ``0 .. upto`` (Shift+Enter from the first) and wait for the last one's result."""
    page.locator(f"{SHOWN} .jp-Cell").first.locator(".jp-InputPrompt").click()
    for _ in range(upto + 1):
        page.keyboard.press("Shift+Enter")
    code = [i for i, c in enumerate(nb.cells[:upto + 1]) if c.cell_type == "code"]
    count, last = len(code), page.locator(f"{SHOWN} .jp-Cell").nth(code[-1]).locator(".jp-InputPrompt")
    page.wait_for_function("([el, n]) => el.innerText.includes('[' + n + ']')", arg=[last.element_handle(), count],
                           timeout=120_000)


def _errors(page) -> list[str]:
    texts = page.locator(f"{SHOWN} .jp-OutputArea-output").all_inner_texts()
    body = page.locator("body").inner_text()
    return [t[:500] for t in texts if TRACEBACK in t] + \
        [m for m in ("Error displaying widget", "Kernel Restarting", "Dead kernel") if m in body]


def _shown(page, css: str, columns: int) -> dict[str, list[str]]:
    """``{cell class: [text per column]}`` of a panel's stats table as the browser shows it."""
    cells = page.locator(f".svgtpu-{css}-stats td").evaluate_all("els => els.map(e => [e.className, e.innerText])")
    out: dict[str, list[str]] = {}
    for cls, text in cells:
        out.setdefault(cls, []).append(text.strip())
    assert all(len(v) == columns for v in out.values()), out
    return out


def _expected(*stats: dict) -> dict[str, list[str]]:
    columns = [{f"svgtpu-{key}": value for key, _, value in explore.rows(s)} for s in stats]
    return {k: [c[k] for c in columns] for k in columns[0]}


def _wait_for_table(page, css: str, *settings: explore.Settings) -> list[dict]:
    """Poll until the panel shows what the library computes for ``settings``; return the stats."""
    stats = [explore.compute(s) for s in settings]
    want = _expected(*stats)
    deadline = time.monotonic() + 60
    while (shown := _shown(page, css, len(settings))) != want:
        if time.monotonic() > deadline:
            diff = {k: (shown.get(k), v) for k, v in want.items() if shown.get(k) != v}
            raise AssertionError(f"{css} panel does not show the library's values: {diff}")
        page.wait_for_timeout(250)
    return stats


def _maps(page, css: str) -> list[bytes]:
    sources = page.locator(f".svgtpu-{css}-figure img.svgtpu-map").evaluate_all("els => els.map(e => e.src)")
    prefix = "data:image/png;base64,"
    assert sources and all(s.startswith(prefix) for s in sources), sources
    return [base64.b64decode(s[len(prefix):]) for s in sources]


def test_explorer_redraws_to_the_values_the_library_computes(lab, page):
    nb = _open(page, lab, "explorer")
    _run_cells(page, nb, len(nb.cells) - 1)
    page.wait_for_selector(".svgtpu-explore-status .svgtpu-ok", timeout=120_000)
    page.wait_for_selector(".svgtpu-compare-status .svgtpu-ok", timeout=120_000)
    assert _errors(page) == []

    # the defaults, in both panels (compare: A unaligned, B snap-aligned)
    [start] = _wait_for_table(page, "explore", START)
    assert _maps(page, "explore") == [explore.tile_png(start)]
    pair = _wait_for_table(page, "compare", START, dataclasses.replace(START, align="snap"))
    assert _maps(page, "compare") == [explore.tile_png(s) for s in pair]
    page.locator(".svgtpu-explorer").screenshot(path=str(SHOTS / "explorer-defaults.png"))

    # move two controls: the production tile becomes 512 x 512 ...
    page.locator(".svgtpu-explore-block_q select").select_option(label="512")
    page.locator(".svgtpu-explore-block_kv select").select_option(label="512")
    small = dataclasses.replace(START, setting=dataclasses.replace(START.setting, block_q=512, block_kv=512))
    [after] = _wait_for_table(page, "explore", small)
    assert after["partial"] != start["partial"] and after["kinds"].shape != start["kinds"].shape
    assert _maps(page, "explore") == [explore.tile_png(after)]
    print("1440p at 512 x 512, in the browser:", page.locator(".svgtpu-explore-status").inner_text())

    # ... and a third: snap alignment at that tile
    page.locator(".svgtpu-explore-align select").select_option(label="snap")
    [aligned] = _wait_for_table(page, "explore", dataclasses.replace(small, align="snap"))
    assert aligned["partial_share"] < after["partial_share"]
    assert _maps(page, "explore") == [explore.tile_png(aligned)]
    assert _errors(page) == []
    page.locator(".svgtpu-explorer").screenshot(path=str(SHOTS / "explorer.png"))
    _shut_down_kernels(lab)


#: One notebook of each kind (the primer, an exercise notebook, a claim notebook): every notebook's title cell,
#: kernel name and parameters cell are checked without a browser (test_notebooks.py), and run through papermill.
IN_BROWSER = ("00_primer", "01b_block_sparse_by_hand", "06_end_to_end_speedup")


@pytest.mark.parametrize("notebook", IN_BROWSER)
def test_notebook_opens_with_the_project_kernel_and_runs_its_parameters(lab, page, notebook):
    """Markdown renders, the `svgtpu (.venv)` kernel starts and runs the parameters cell (running
    the whole notebook is test_notebooks.py's job, through papermill)."""
    assert notebook in reproduce.NOTEBOOKS
    if not (lab["root"] / f"{notebook}.ipynb").exists():
        pytest.skip(f"{notebook}.ipynb is not in notebooks/ yet")
    nb = _open(page, lab, notebook)
    heading = nb.cells[0].source.splitlines()[0].lstrip("# ").strip()
    rendered = page.locator(f"{SHOWN} .jp-RenderedMarkdown h1").first.inner_text()
    assert rendered.replace("¶", "").strip() == heading
    _run_cells(page, nb, next(i for i, c in enumerate(nb.cells) if c.cell_type == "code"))
    assert _errors(page) == []
    page.screenshot(path=str(SHOTS / f"{notebook}.png"))
    _shut_down_kernels(lab)

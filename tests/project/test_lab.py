"""JupyterLab in a real browser: the server started by `make lab`, Debian's chromium driven by selenium through
chromedriver, a notebook with two plots opened on the "Python (perflab)" kernel and run with Run All Cells.

Skipped, with the reason, where chromium, chromedriver or selenium are missing, or outside the venv `make setup`
builds (the server is started with its `make lab`); CI installs them (.ci/run). On failure a screenshot, the page's
HTML and the server's log are kept in outputs/tmp/test-artefacts/ (or $PERFLAB_TEST_ARTEFACTS)."""
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

import perflab

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parents[1] / "fixtures" / "lab" / "plots.ipynb"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# as the closed test network wants it: no background connections, a fresh profile (added per run)
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1400,1000"]
ARTEFACTS = Path(os.environ.get("PERFLAB_TEST_ARTEFACTS") or ROOT / "outputs" / "tmp" / "test-artefacts")
pytestmark = pytest.mark.browser


def _missing() -> str:
    absent = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).is_file()]
    if absent:
        return f"{' and '.join(absent)} not found: apt-get install chromium chromium-driver (as .ci/run does)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: make setup installs it (the dev extra)"
    if not (Path(sys.prefix) / ".perflab-installed").is_file() or shutil.which("make") is None:
        return f"the lab is started with `make lab`: run the tests in the venv `make setup` builds, not {sys.prefix}"
    return ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    """`make lab` serving a folder with the fixture notebook (and a conftest.py, which the file browser must hide).
    -> (url of the notebook, the server's log file)."""
    why = _missing()
    if why:
        if os.environ.get("PERFLAB_REQUIRE_CLIENTS"):  # CI installed them (.ci/run): absent means broken
            pytest.fail(f"PERFLAB_REQUIRE_CLIENTS is set, but {why}")
        pytest.skip(why)
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(FIXTURE, served / FIXTURE.name)
    (served / "conftest.py").write_text("# nbval's, in notebooks/: no notebook\n")
    port, token = _free_port(), uuid.uuid4().hex
    args = (f"--no-browser --port={port} --ServerApp.port_retries=0 --IdentityProvider.token={token} "
            f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}")
    venv = Path(sys.prefix)
    log = tmp_path / "lab.log"
    # Jupyter's own folders in the test's (kernels are found in the venv, where `make setup` registered perflab's)
    env = {**os.environ, **{f"JUPYTER_{k}_DIR": str(tmp_path / k.lower()) for k in ("RUNTIME", "DATA", "CONFIG")}}
    with open(log, "wb") as out:
        # -o: the venv counts as set up (a test never installs); the lab target as a user runs it
        server = subprocess.Popen(["make", "-C", str(ROOT), "-o", str(venv / ".perflab-installed"), "lab",
                                   f"VENV={venv}", f"LAB_DIR={served}", f"LAB_ARGS={args}"],
                                  stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_server(f"{base}/api/status?token={token}", server, log)
        yield f"{base}/lab/tree/{FIXTURE.name}?token={token}", log
    finally:
        _stop_group(server)


def _stop_group(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM to make and the jupyter server it started (their own process group), SIGKILL if they linger."""
    os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout)
    while time.monotonic() < deadline:  # the server may still be shutting down after make has gone
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _wait_for_server(url: str, server: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"`make lab` exited ({server.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"the lab server did not answer within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS + [f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        opts.add_argument(flag)
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER, log_output=str(tmp_path / "driver.log")))
    try:
        yield driver
    finally:
        driver.quit()


@contextlib.contextmanager
def _kept_on_failure(driver, name: str, server_log: Path):
    """On a failure, keep what the browser showed (screenshot, HTML) and the server's log as test artefacts."""
    try:
        yield
    except BaseException:
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        stem = ARTEFACTS / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        with contextlib.suppress(Exception):
            driver.save_screenshot(str(stem.with_suffix(".png")))
            stem.with_suffix(".html").write_text(driver.page_source)
        shutil.copy(server_log, stem.with_suffix(".lab.log"))
        print(f"\nkept: {stem}.png, {stem}.html, {stem}.lab.log", file=sys.stderr)
        raise


def _until(driver, what: str, probe, ok, timeout: float = 90):
    """Poll `probe(driver)` until `ok(value)`; fail naming `what` and the last value seen."""
    deadline, value = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        value = probe(driver)
        if ok(value):
            return value
        time.sleep(0.3)
    pytest.fail(f"{what}: not within {timeout:.0f} s (last seen: {value!r})")


def _js(driver, script: str, *args):
    return driver.execute_script(script, *args)


def _click_menu(driver, wait, menu: str, entry: str) -> None:
    """Menu bar `menu`, then its item `entry`, as a user clicks them."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    wait.until(ec.element_to_be_clickable(
        (By.XPATH, f"//li[contains(@class,'lm-MenuBar-item')][.//div[text()='{menu}']]"))).click()
    wait.until(ec.element_to_be_clickable(
        (By.XPATH, f"//li[contains(@class,'lm-Menu-item')][.//div[text()='{entry}']]"))).click()




# the toolbar's kernel name and its execution indicator: "idle" shows before a kernel exists ("No Kernel", then
# initializing, connecting, unknown), so only the pair says the kernel takes cells (Run All before that runs nothing)
KERNEL = ("const p = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');"
          "const k = p && p.querySelector('.jp-KernelName');"
          "const i = p && p.querySelector('.jp-Notebook-ExecutionIndicator');"
          "return [k ? k.textContent.trim() : '', i ? i.getAttribute('data-status') : ''];")
PROMPTS = ("return [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell')]"
           ".map(c => (c.querySelector('.jp-InputPrompt') || {}).textContent || '');")
OUTPUTS = ("return [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output')]"
           ".map(o => [o.getAttribute('data-mime-type') || '', o.textContent]);")
IMAGES = "return [...document.querySelectorAll('.jp-RenderedImage img')].map(i => i.complete ? i.naturalWidth : 0);"
LISTING = "return [...document.querySelectorAll('.jp-DirListing-item .jp-DirListing-itemText')].map(e => e.textContent);"


def test_a_notebook_runs_all_cells_in_jupyterlab_on_the_perflab_kernel(lab, browser, request):
    from selenium.webdriver.support.ui import WebDriverWait

    url, log = lab
    with _kept_on_failure(browser, request.node.name, log):
        browser.get(url)
        # the notebook's kernelspec names perflab's kernel, the one `make setup` registered
        _until(browser, "the perflab kernel, idle", lambda d: _js(d, KERNEL), lambda k: k == ["Python (perflab)", "idle"])
        _click_menu(browser, WebDriverWait(browser, 60), "Run", "Run All Cells")
        prompts = _until(browser, "every cell run", lambda d: _js(d, PROMPTS),
                         lambda p: len(p) == 3 and all(x.strip() not in ("", "[ ]:", "[*]:") for x in p))
        assert [x.strip() for x in prompts] == ["[1]:", "[2]:", "[3]:"]  # in order, once each

        outputs = _js(browser, OUTPUTS)
        errors = [text for mime, text in outputs if "Traceback" in text or "Error" in text]
        assert not errors, errors                                         # no error output
        assert any(f"perflab {perflab.__version__}" in text for _, text in outputs), outputs  # this checkout's perflab
        widths = _until(browser, "two plots rendered", lambda d: _js(d, IMAGES), lambda w: len(w) == 2 and all(w))
        assert min(widths) > 100, widths

        names = _until(browser, "the file browser", lambda d: _js(d, LISTING), lambda n: "plots.ipynb" in n)
        assert "conftest.py" not in names, names                          # make lab hides nbval's conftest.py

"""The live view's page in a real browser: headless Chromium driven by Selenium against ``shoal view``.

Chromium and its driver come from the system (Debian's ``chromium`` and ``chromium-driver``),
named by path so that Selenium never downloads anything. Without them the module skips and
says why, unless SHOAL_REQUIRE_BROWSER=1 (set by ``make test`` where it installed them): then
a broken install fails. Screenshots are kept in ``test-artifacts/`` of the repository.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
REQUIRED = os.environ.get("SHOAL_REQUIRE_BROWSER") == "1"
MISSING = [p for p in (CHROMIUM, DRIVER) if not os.access(p, os.X_OK)]
# make test sets SHOAL_REQUIRE_BROWSER=1 where it installed the browser: there a broken one fails.
pytestmark = pytest.mark.skipif(bool(MISSING) and not REQUIRED,
                                reason=f"no browser to drive: {', '.join(MISSING)} missing "
                                       "(make chromium installs Debian's)")

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
SCENARIO = "synthetic-hotspot"
# A short run with frames at every step: a run the page can watch for a few seconds.
CHANGED = {"run.steps": "40", "app.sigma": "0.09", "app.grid": "[128, 128]", "run.nodes": "2", "run.frame_every": "1"}
# Every text the page shows in these elements, as it changes (polling from the test could miss
# a short run's frames).
WATCH = """
window.seen = {};
for (const id of ["frame-step", "loads-steps"]) {
  const el = document.getElementById(id);
  window.seen[id] = [];
  new MutationObserver(() => window.seen[id].push(el.textContent))
    .observe(el, {childList: true, characterData: true, subtree: true});
}
"""
WAIT_S = 120  # generous: the run imports numba-compiled kernels on a loaded machine


@pytest.fixture(scope="module")
def viewer(tmp_path_factory):
    """A ``shoal view`` process serving a fresh root: its URL (with the token) and root."""
    root = tmp_path_factory.mktemp("view-root")
    proc = subprocess.Popen([sys.executable, "-m", "shoal", "view", "--root", str(root)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    match = re.fullmatch(r"shoal view: (http://127\.0\.0\.1:\d+/\?token=\S+)\n", line)
    if match is None:
        proc.kill()
        pytest.fail(f"shoal view printed {line!r}; stderr: {proc.stderr.read()[-2000:]}")
    yield match.group(1), root
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module, with its console log readable."""
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,1000",
                "--force-device-scale-factor=1"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    yield driver
    driver.quit()


def text(driver, element_id: str) -> str:
    return driver.find_element(By.ID, element_id).text


def wait(driver, condition, what: str, timeout: float = WAIT_S):
    """Poll ``condition`` until it holds; an element the page re-rendered meanwhile (stale) is
    polled again, not a failure: the page redraws its lists whenever the server says so."""
    return WebDriverWait(driver, timeout, poll_frequency=0.05,
                         ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: condition(d),
                                                                                     message=what)


def choose(driver, select: str, value: str) -> None:
    """Select ``value`` in the ``<select>`` of id ``select``, again if the page re-rendered the
    list between finding it and choosing (stale)."""

    def chosen(d):
        Select(d.find_element(By.ID, select)).select_by_value(value)
        return True

    wait(driver, chosen, f"{value!r} chosen in #{select}")


def errors(driver) -> list[str]:
    """The page's console errors since the last call (network refusals the test caused excepted)."""
    return [e["message"] for e in driver.get_log("browser")
            if e["level"] == "SEVERE" and "Failed to load resource" not in e["message"]]


def set_param(driver, key: str, value: str) -> None:
    field = driver.find_element(By.ID, f"param-{key}")
    field.clear()
    field.send_keys(value)


def canvas_pixels(driver, name: str) -> np.ndarray:
    """The frame canvas's rectangle of a screenshot saved as ``test-artifacts/view-<name>.png``."""
    from PIL import Image

    ARTIFACTS.mkdir(exist_ok=True)
    # The screenshot shows the viewport: bring the canvas into it and take its place there.
    rect = driver.execute_script("const c = document.getElementById('frame-canvas'); c.scrollIntoView();"
                                 "return c.getBoundingClientRect().toJSON();")
    png = driver.get_screenshot_as_png()
    (ARTIFACTS / f"view-{name}.png").write_bytes(png)
    image = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    x0, y0 = int(rect["left"]) + 2, int(rect["top"]) + 2
    return image[y0:y0 + int(rect["height"]) - 4, x0:x0 + int(rect["width"]) - 4]


def test_the_page_watches_a_run_it_started_and_plays_it_back(viewer, browser):
    url, root = viewer
    browser.get(url)
    wait(browser, lambda d: d.find_elements(By.ID, "param-run.steps"), "the scenarios' parameters")
    assert errors(browser) == []
    scenarios = {s["name"]: s for s in json.load(urllib.request.urlopen(url.replace("/?", "/api/scenarios?")))}

    # A bad value is refused with the server's one line on the page, and no run starts.
    choose(browser, "scenario", SCENARIO)
    set_param(browser, "run.steps", "twelve")
    browser.find_element(By.ID, "start").click()
    wait(browser, lambda d: text(d, "error"), "the error of a bad parameter")
    assert "run.steps" in text(browser, "error")
    assert not any(p.is_dir() for p in root.iterdir())

    # Changed values are marked; the run starts with exactly them.
    for key, value in CHANGED.items():
        set_param(browser, key, value)
    marked = {row.find_element(By.TAG_NAME, "td").text for row in browser.find_elements(By.CSS_SELECTOR, "tr.changed")}
    assert marked == set(CHANGED)
    browser.execute_script(WATCH)
    browser.find_element(By.ID, "start").click()
    wait(browser, lambda d: text(d, "error") == "", "the error to clear once a run starts")

    # Frames advance and the heatmap grows while the run goes (every value the page showed).
    wait(browser, lambda d: text(d, "status").startswith("run finished"), "the run's end")
    steps = [int(s) for s in browser.execute_script("return window.seen['frame-step']") if s.isdigit()]
    rows = [int(s) for s in browser.execute_script("return window.seen['loads-steps']")]
    assert len(set(steps)) >= 3 and steps == sorted(steps), steps
    assert len(set(rows)) >= 3 and rows == sorted(rows), rows
    assert text(browser, "loads-steps") == CHANGED["run.steps"]  # one load row per step, none lost
    assert text(browser, "frame-step") == CHANGED["run.steps"]
    assert errors(browser) == []

    # The frame is drawn: a field in many colours fills the canvas.
    pixels = canvas_pixels(browser, "live")
    colours = np.unique(pixels.reshape(-1, 3), axis=0)
    background = np.all(pixels == pixels[0, 0], axis=-1)
    assert len(colours) > 100 and background.mean() < 0.5, (len(colours), background.mean())

    # The run folder's config holds the scenario with exactly the changed values.
    (folder,) = [p for p in root.iterdir() if p.is_dir()]
    config = tomllib.loads((folder / "config.toml").read_text())
    for key, default in scenarios[SCENARIO]["params"].items():
        section, name = key.split(".", 1)
        value = tomllib.loads(f"v = {CHANGED.get(key, default)}")["v"]
        assert config[section][name] == value, key

    # Played back, the run shows its first frame, and the slider moves to another.
    wait(browser, lambda d: folder.name in [o.get_attribute("value") for o in
                                            d.find_elements(By.CSS_SELECTOR, "#runs option")], "the run list")
    choose(browser, "runs", folder.name)
    browser.find_element(By.ID, "open").click()
    wait(browser, lambda d: text(d, "status").startswith(f"playback of {folder.name}"), "the playback")
    picks = [o.text for o in browser.find_elements(By.CSS_SELECTOR, "#frame-pick option")]
    wait(browser, lambda d: text(d, "frame-step") == picks[0], "the first frame")
    scrub = browser.find_element(By.ID, "scrub")
    browser.execute_script("arguments[0].value = 5; arguments[0].dispatchEvent(new Event('input'))", scrub)
    wait(browser, lambda d: text(d, "frame-step") == picks[5], "the scrubbed frame")
    pixels = canvas_pixels(browser, "playback")
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 100
    assert errors(browser) == []

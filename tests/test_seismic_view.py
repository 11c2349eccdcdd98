"""The live view draws a seismic wavefield as the report does: symmetric about 0 up to the
99.5th percentile of its magnitude (the page's robustBound is NumPy's percentile), with the
layer interfaces on the depth section. Headless Chromium, as in test_view_browser."""

from __future__ import annotations

import numpy as np
import pytest

import test_view_browser as page
from shoal.graphics.drawing import ROBUST_PERCENTILE, robust_bound
from shoal.session import run_scenario
from test_view_browser import canvas_pixels, choose, errors, text, wait

pytestmark = page.pytestmark
viewer, browser = page.viewer, page.browser  # its fixtures: a `shoal view` and a headless Chromium

from selenium.webdriver.common.by import By  # noqa: E402

IMPORT = """
const done = arguments[arguments.length - 1];
import(document.querySelector('script[type=module]').src).then((m) => done(m.robustBound(arguments[0])));
"""


def test_the_pages_robust_bound_is_numpys_percentile(viewer, browser):
    url, _ = viewer
    browser.get(url)
    wait(browser, lambda d: d.find_elements(By.ID, "param-run.steps"), "the page")
    rng = np.random.default_rng(3)
    field = np.sin(np.arange(4000) * 0.37) * rng.uniform(0.5, 1.0, 4000)
    field[:7] = [120.0, -95.0, 80.0, np.nan, np.inf, -60.0, 40.0]  # a source's few cells, and non-finite ones
    got = browser.execute_async_script(IMPORT, [None if not np.isfinite(v) else float(v) for v in field])
    finite = field[np.isfinite(field)]
    assert got == pytest.approx(float(np.percentile(np.abs(finite), ROBUST_PERCENTILE)), rel=1e-12)
    assert got < 1.0  # the wave's, not the source's 120
    assert browser.execute_async_script(IMPORT, [0.0] * 500 + [3.0]) == 3.0  # zero but in a few cells: the max
    assert browser.execute_async_script(IMPORT, [0.0] * 50) == 1.0  # at rest
    assert errors(browser) == []


def test_a_seismic_run_plays_back_on_the_robust_scale_with_its_interfaces(viewer, browser):
    url, root = viewer
    run = run_scenario("seismic-halfspace", steps=40, tiles=4, nodes=1, workers=1, out=root / "quake",
                       set=["app.cells=[40,20,24]", "app.absorbing=4", "app.source_at=[2000.0,1000.0,600.0]",
                            "app.receivers=[[1000.0,1000.0,0.0]]", "run.frame_every=10",
                            "app.layers=[[0.0,6000.0,3464.0,2700.0],[1500.0,6500.0,3700.0,2800.0]]"])
    frames = sorted((run.path / "frames").glob("state-*.npz"))
    sections = [np.load(p)["vz_section"] for p in frames]
    # the frame where a few cells at the source stand out most against the wave
    k = int(np.argmax([np.abs(s).max() / robust_bound(s) for s in sections]))
    assert np.abs(sections[k]).max() > 1.5 * robust_bound(sections[k])
    browser.get(url)
    wait(browser, lambda d: "quake" in [o.get_attribute("value")
                                        for o in d.find_elements(By.CSS_SELECTOR, "#runs option")], "the run list")
    choose(browser, "runs", "quake")
    browser.find_element(By.ID, "open").click()
    wait(browser, lambda d: text(d, "status").startswith("playback of quake"), "the playback")
    choose(browser, "scale", "frame")
    scrub = browser.find_element(By.ID, "scrub")
    browser.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))",
                           scrub, k)
    step = frames[k].stem.split("-")[1].lstrip("0") or "0"
    wait(browser, lambda d: text(d, "frame-step") == step, "the chosen frame")
    choose(browser, "layer", "vz_section")
    wait(browser, lambda d: "percentile" in text(d, "range-name"), "the wavefield's colour bar")
    top = robust_bound(sections[k])
    assert float(text(browser, "range-hi")) == pytest.approx(top, rel=5e-3)
    assert float(text(browser, "range-lo")) == pytest.approx(-top, rel=5e-3)
    assert text(browser, "range-name") == "vz_section · frame's ±99.5th percentile of |value|"
    # the interface at 1500 m: a dotted dark line across the section (the field is white-ish there)
    pixels = canvas_pixels(browser, "seismic")
    dark = (pixels.sum(axis=-1) < 500).mean(axis=1)  # per row: the dashes cover 2 pixels in 5
    lines = np.nonzero(dark > 0.3)[0]
    assert 1 <= len(lines) <= 3 and np.ptp(lines) <= 2, dark.max()  # one thin line
    assert errors(browser) == []

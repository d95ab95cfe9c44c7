"""The page's charts lay their labels out so that none collides with another or leaves its chart.

Every <text> in the chart SVGs is measured in the browser (its getBBox, carried to the screen by
its getScreenCTM, so rotated labels are measured as drawn) and every pair is checked for
overlap, every label for containment in what its SVG shows. Drawn from the server's estimates
for both cost models and a mixture-of-experts job (every step of its waterfall costs something)
with the charts stacked (an 800 px window) and side by side (1400 px), and from made-up
extremes (long step names, values near 0 and at the top of the scale) handed to the drawing
functions directly, also at the narrowest side-by-side window (1120 px).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from optimizer.costmodel import standard, workshop
from tests import test_page_browser as page_tests
from tests.test_page_browser import choose, state, text, wait_for

# The same real server and headless Chromium as the page's other tests (one of each per module).
base_url = page_tests.base_url
browser = page_tests.browser

CHARTS = ("memory-chart", "mfu-chart", "pareto-chart")
WIDTHS = (800, 1400)  # charts stacked; charts side by side
HEIGHT = 900
SLACK_PX = 0.5  # anti-aliasing: boxes may touch, not overlap

# Every text in the charts as drawn: its four corners on the screen, and what each SVG shows
# (its element's box, within which it clips, meeting the area its viewBox maps to).
MEASURE_JS = """
const corners = (element, box) => {
  const m = element.getScreenCTM();
  return [[box.x, box.y], [box.x + box.width, box.y], [box.x + box.width, box.y + box.height],
          [box.x, box.y + box.height]]
    .map(([x, y]) => new DOMPoint(x, y).matrixTransform(m)).map((p) => [p.x, p.y]);
};
return arguments[0].map((id) => {
  const chart = document.getElementById(id);
  const element = chart.getBoundingClientRect();
  const vb = chart.viewBox.baseVal;
  const [[x0, y0], , [x1, y1]] = corners(chart, vb);
  const view = [Math.max(element.left, x0), Math.max(element.top, y0),
                Math.min(element.right, x1), Math.min(element.bottom, y1)];
  const texts = [...chart.querySelectorAll("text")]
    .filter((t) => t.textContent.trim() !== "" && t.getBBox().width > 0)
    .map((t) => ({ text: t.textContent, cls: t.getAttribute("class") || "",
                   corners: corners(t, t.getBBox()) }));
  const bars = [...chart.querySelectorAll("rect.bar")].map((r) => {
    const b = r.getBoundingClientRect();
    return [b.left, b.top, b.right, b.bottom];
  });
  return { id, view, texts, bars };
});
"""


def next_frames(browser: WebDriver) -> None:
    """Two animation frames: any redraw a resize asked for has been done."""
    browser.execute_async_script(
        "const done = arguments[0];"
        "requestAnimationFrame(() => requestAnimationFrame(() => done(true)));"
    )


def overlap(a: list[list[float]], b: list[list[float]]) -> float:
    """How far two convex quadrilaterals overlap: the least penetration over the separating
    axes (the normals of their edges); 0 or less when some axis separates them."""
    least = float("inf")
    for quad in (a, b):
        for i in range(4):
            (x0, y0), (x1, y1) = quad[i], quad[(i + 1) % 4]
            nx, ny = y0 - y1, x1 - x0
            length = (nx * nx + ny * ny) ** 0.5
            if length == 0:
                continue
            pa = [(x * nx + y * ny) / length for x, y in a]
            pb = [(x * nx + y * ny) / length for x, y in b]
            least = min(least, min(max(pa), max(pb)) - max(min(pa), min(pb)))
    return least


def outside(corners: list[list[float]], view: list[float]) -> float:
    """How far a label reaches beyond the box [left, top, right, bottom]."""
    left, top, right, bottom = view
    xs, ys = [x for x, _ in corners], [y for _, y in corners]
    return max(left - min(xs), top - min(ys), max(xs) - right, max(ys) - bottom, 0.0)


def within(corners: list[list[float]], box: list[float]) -> bool:
    return outside(corners, box) <= SLACK_PX


def label_problems(browser: WebDriver) -> list[str]:
    """Every collision, every label cut off by its chart's edge, and every white value label
    that leaves its bar (white on the page's white is as good as cut off)."""
    problems = []
    for chart in browser.execute_script(MEASURE_JS, list(CHARTS)):
        texts = chart["texts"]
        name = lambda t: f"{t['text']!r} ({t['cls'] or 'text'})"  # noqa: E731
        for i, a in enumerate(texts):
            beyond = outside(a["corners"], chart["view"])
            if beyond > SLACK_PX:
                problems.append(f"{chart['id']}: {name(a)} is cut off by {beyond:.1f} px")
            if "inside" in a["cls"].split() and not any(
                within(a["corners"], bar) for bar in chart["bars"]
            ):
                problems.append(f"{chart['id']}: white {name(a)} spills out of its bar")
            for b in texts[i + 1 :]:
                depth = overlap(a["corners"], b["corners"])
                if depth > SLACK_PX:
                    problems.append(
                        f"{chart['id']}: {name(a)} overlaps {name(b)} by {depth:.1f} px"
                    )
    return problems


def assert_labels_clear(browser: WebDriver) -> None:
    next_frames(browser)
    problems = label_problems(browser)
    assert not problems, "\n".join(problems)


def settle(page: WebDriver) -> None:
    wait_for(page, lambda: state(page) in ("ready", "error"))


def type_into(page: WebDriver, element_id: str, value: str) -> None:
    box = page.find_element(By.ID, element_id)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(value)
    settle(page)


def show_case(page: WebDriver, base_url: str, case: str) -> None:
    """The page at the plate's job under the workshop or standard cost model, or Mixtral 8x7B
    on 256 GPUs (standard) at a layout where each step of the waterfall loses something."""
    page.get(base_url + "/")
    wait_for(page, lambda: state(page) == "ready")
    if case == "moe":
        wait_for(page, lambda: page.find_elements(By.CSS_SELECTOR, "#model [value=mixtral-8x7b]"))
        choose(page, "model", "mixtral-8x7b")
        settle(page)
        type_into(page, "gpus", "256")
    if case in ("standard", "moe"):
        choose(page, "profile", "standard")
        settle(page)
    if case == "moe":
        # ZeRO-0: each rank steps all its parameters, so the optimiser step shows too
        layout = (("pp", "4"), ("tp", "2"), ("cp", "2"), ("vpp", "2"), ("ep", "4"), ("zero", "0"))
        for control, value in (*layout, ("recompute", "selective")):
            choose(page, control, value)
            settle(page)
    wait_for(page, lambda: state(page) == "ready")
    assert text(page, "request-error") == ""


# every step of each profile's waterfall is a row of the page's table
STEPS = {
    "workshop": len(workshop.MFU_STEP_NAMES),
    "standard": len(standard.MFU_STEP_NAMES),
    "moe": len(standard.MFU_STEP_NAMES),
}


@pytest.mark.browser
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("case", STEPS)
def test_chart_labels_neither_collide_nor_leave_the_chart(
    browser: WebDriver, base_url: str, case: str, width: int
) -> None:
    browser.set_window_size(width, HEIGHT)
    show_case(browser, base_url, case)
    rows = browser.find_elements(By.CSS_SELECTOR, "#mfu-table tbody tr")
    assert len(rows) == STEPS[case]
    if case == "moe":  # every step costs something: no bar of the waterfall is trivial, but
        # the host overhead of eager MoE layers, which the page's default assumptions set to 0
        changes = [row.find_elements(By.TAG_NAME, "td")[1].text for row in rows]
        trivial = {
            standard.MFU_STEP_NAMES[i]
            for i, change in enumerate(changes)
            if i > 0 and change in ("0.0 pts", "-0.0 pts")
        }
        assert trivial == {"after host overhead"}, changes
    assert_labels_clear(browser)


# Made-up figures at the edges of what the charts must carry, drawn by the page's own module.
LONG_NAME = "after a remarkably long effect that nobody has given a short label yet"
EXTREMES: dict[str, dict[str, Any]] = {
    "near-zero": {
        "memory": {
            "weights": 0.004,
            "gradients": 0.0,
            "optimizer": 0.011,
            "activations": 0.002,
            "total": 0.017,
            "capacity": 80,
        },
        "fits": True,
        "steps": [
            ("kernel efficiency", 0.031),
            ("after uneven stages", 0.012),
            ("after recomputation", 0.0049),
            ("after pipeline bubble", 0.0011),
            ("after expert all-to-all", 0.0),
        ],
        "pareto": [(0.02, 0.001), (0.4, 0.002), (79.9, 0.004)],
    },
    "at-the-top": {
        "memory": {
            "weights": 0.01,
            "gradients": 0.02,
            "optimizer": 0.03,
            "activations": 80.0,
            "total": 80.06,
            "capacity": 80,
        },
        "fits": False,
        "steps": [
            ("kernel efficiency", 0.9999),
            ("after uneven stages", 0.9998),
            ("after recomputation", 0.9997),
            ("after pipeline bubble", 0.9996),
            ("after tensor-parallel communication", 0.9995),
            ("after context-parallel communication", 0.9994),
            ("after expert all-to-all", 0.9993),
            ("after pipeline sends", 0.9992),
            ("after data-parallel communication", 0.9991),
        ],
        "pareto": [(80.0, 0.9999), (79.99, 0.999)],
    },
    "long-names": {
        "memory": {
            "weights": 512.5,
            "gradients": 0.05,
            "optimizer": 1024.25,
            "activations": 0.03,
            "total": 1536.83,
            "capacity": 192,
        },
        "fits": False,
        "steps": [
            ("kernel efficiency", 0.6),
            (LONG_NAME, 0.58),
            ("after the supercalifragilisticexpialidocious overlap", 0.3),
            ("after uneven stages", 0.29),
            ("after recomputation", 0.25),
            ("after pipeline bubble", 0.2),
            ("after tensor-parallel communication", 0.19),
            ("after context-parallel communication", 0.185),
            ("after expert all-to-all", 0.1),
            ("after pipeline sends", 0.05),
            ("after data-parallel communication", 0.001),
            ("after one more thing", 0.0005),
        ],
        "pareto": [(0.5, 0.6), (100.0, 0.3), (1900.0, 0.61)],
    },
}

DRAW_JS = """
const [figures, done] = arguments;
import("/static/charts.js").then((charts) => {
  charts.drawMemoryChart(figures.memory, figures.fits);
  charts.drawMfuChart(figures.steps.map(([name, mfu]) => ({ name, mfu })));
  const layout = { tp: 8, pp: 16, cp: 1, dp: 128, vpp: 4, micro_batch: 1, zero: 2, recompute: "none" };
  const points = figures.pareto.map(([total, mfu]) => (
    { memory_gb: { total, capacity: figures.memory.capacity }, mfu, layout }));
  charts.drawPareto({ frontier: points, visited: points.slice(1), current: points[0],
                      isOptimum: () => false, onPick: () => {} });
  done(true);
}, (error) => done(String(error)));
"""


@pytest.mark.browser
@pytest.mark.parametrize("width", (*WIDTHS, 1120))
@pytest.mark.parametrize("extreme", EXTREMES)
def test_chart_labels_hold_at_the_extremes(
    browser: WebDriver, base_url: str, extreme: str, width: int
) -> None:
    browser.set_window_size(width, HEIGHT)
    browser.get(base_url + "/")
    wait_for(browser, lambda: state(browser) == "ready")
    figures = json.loads(json.dumps(EXTREMES[extreme]))
    assert browser.execute_async_script(DRAW_JS, figures) is True
    assert len(browser.find_elements(By.CSS_SELECTOR, "#mfu-chart rect.bar")) == len(
        figures["steps"]
    )
    assert_labels_clear(browser)


@pytest.mark.browser
def test_charts_are_laid_out_again_when_the_window_changes(
    browser: WebDriver, base_url: str
) -> None:
    browser.set_window_size(1400, HEIGHT)
    show_case(browser, base_url, "standard")
    for width in (800, 1400):
        browser.set_window_size(width, HEIGHT)
        assert_labels_clear(browser)
        # laid out at the width shown, so the labels keep the page's text size
        widths = browser.execute_script(
            "return arguments[0].map((id) => { const c = document.getElementById(id);"
            " return [c.viewBox.baseVal.width, c.getBoundingClientRect().width]; })",
            list(CHARTS),
        )
        assert all(abs(drawn - shown) < 1 for drawn, shown in widths), (width, widths)

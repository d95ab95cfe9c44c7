"""The workshop page driven in headless Chromium against a real `layoutopt serve`.

Expected figures are the plate's (the cost-model spec's reference table: the default layout
shows 78.6 GB and 43% MFU, tp 16 across the network 16%) or come from the exhaustive
enumerator, never from the page or the solver under test.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

from api.schemas.requests import SEARCH_EXAMPLE
from bench.server import free_port, start_server, stop_server
from models.layout import Layout
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.search import enumerator
from optimizer.search.problem import SearchProblem, resolve_space
from optimizer.search.space import SearchSpace
from tests.helpers import plate_job

# The README's picture, rewritten only when asked (`make screenshot`): a test run leaves the
# work tree as it found it.
SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "workshop.png"
UPDATE_SCREENSHOT = "LAYOUTOPT_UPDATE_SCREENSHOT"
WAIT_S = 30.0  # a ceiling for slow CI machines, not a speed claim
LAPTOP_WIDTH, LAPTOP_HEIGHT = 1366, 768
CHROME_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def find_program(name: str) -> str | None:
    """On PATH, or where Debian's packages put it."""
    found = shutil.which(name)
    if found is None and os.access(f"/usr/bin/{name}", os.X_OK):
        found = f"/usr/bin/{name}"
    return found


def browser_paths() -> tuple[str, str]:
    """Debian's chromium and chromedriver; in CI their absence fails the run, never skips it."""
    chromium, driver = find_program("chromium"), find_program("chromedriver")
    if chromium and driver:
        return chromium, driver
    message = "no chromium/chromedriver found (apt-get install chromium chromium-driver)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}: the workshop page must be tested in CI")
    pytest.skip(message)


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `layoutopt serve` on a free loopback port, as `make run` starts it."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("page-server") / "server.log"
    with log_path.open("wb") as log:
        server = start_server(port, {"WORKERS": "2"}, log)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_server(server)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    chromium, driver_path = browser_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.add_argument(f"--window-size={LAPTOP_WIDTH},{LAPTOP_HEIGHT}")
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page(browser: WebDriver, base_url: str) -> WebDriver:
    """The page freshly loaded with its default (the plate's layout), figures drawn."""
    browser.get(base_url + "/")
    wait_for(browser, lambda: state(browser) == "ready")
    return browser


def wait_for(browser: WebDriver, condition: Callable[[], object]) -> None:
    try:
        WebDriverWait(browser, WAIT_S).until(lambda _: condition())
    except TimeoutException:
        shown = {name: text(browser, name) for name in ("total-memory", "mfu", "request-error")}
        pytest.fail(f"page never reached the expected state; showing {shown}")


def state(browser: WebDriver) -> str:
    return str(browser.execute_script("return document.body.dataset.state || ''"))


def text(browser: WebDriver, element_id: str) -> str:
    return str(browser.find_element(By.ID, element_id).text)


def choose(browser: WebDriver, element_id: str, value: str) -> None:
    Select(browser.find_element(By.ID, element_id)).select_by_value(value)


def shown_layout(browser: WebDriver) -> dict[str, str]:
    ids = (
        "tp",
        "pp",
        "cp",
        "vpp",
        "micro-batch",
        "zero",
        "recompute",
        "schedule",
        "ep",
        "placement",
    )
    return {i: browser.find_element(By.ID, i).get_attribute("value") or "" for i in ids}


@pytest.mark.browser
def test_default_shows_the_plates_figures(page: WebDriver) -> None:
    assert text(page, "total-memory") == "78.6 GB"
    assert text(page, "mfu") == "43%"
    # dp = 16384 / (8 * 16 * 1) = 128; bubble (15/4) / (16 + 15/4) = 19.0%
    assert text(page, "dp") == "128"
    assert text(page, "bubble") == "19.0%"
    memory_rows = page.find_elements(By.CSS_SELECTOR, "#memory-table tbody tr")
    assert [row.text for row in memory_rows[:4]] == [
        "Weights 6.34",
        "Gradients 0.05",
        "Optimiser state 0.30",
        "Activations 71.87",
    ]
    waterfall = page.find_elements(By.CSS_SELECTOR, "#mfu-chart rect.bar")
    assert len(waterfall) == 5  # kernel efficiency, bubble, TP, DP, recomputation
    unlabelled = page.execute_script(
        "return [...document.querySelectorAll('input, select, textarea')]"
        ".filter((c) => !c.labels || c.labels.length === 0).map((c) => c.id)"
    )
    assert unlabelled == []


@pytest.mark.browser
def test_tp_16_lowers_the_mfu_and_warns(page: WebDriver) -> None:
    choose(page, "tp", "16")
    wait_for(page, lambda: state(page) == "ready" and text(page, "mfu") != "43%")
    assert text(page, "mfu") == "16%"  # the plate's figure for tp 16 across the network
    assert text(page, "dp") == "64"  # 16384 / (16 * 16)
    assert "num_kv_heads(8)" in text(page, "warnings")


@pytest.mark.browser
def test_invalid_values_are_disabled_or_explained(page: WebDriver) -> None:
    # pp 64 with vpp 4 needs 256 chunks of 126 layers: offered, but disabled with the reason.
    pp_64 = page.find_element(By.CSS_SELECTOR, "#pp option[value='64']")
    assert not pp_64.is_enabled()
    assert "exceed num_layers(126)" in (pp_64.get_attribute("textContent") or "")
    # A global batch dp(128) does not divide: the server's message, beside the controls.
    batch = page.find_element(By.ID, "global-batch")
    batch.send_keys(Keys.CONTROL, "a")
    batch.send_keys("100")
    wait_for(page, lambda: state(page) == "error")
    assert "not divisible by dp(128)" in text(page, "request-error")
    assert batch.get_attribute("aria-invalid") == "true"


@pytest.mark.browser
def test_scenarios_and_keyboard(page: WebDriver) -> None:
    no_pipeline = page.find_element(By.CSS_SELECTOR, "[data-scenario='no-pipeline']")
    no_pipeline.send_keys(Keys.ENTER)  # buttons are keyboard operable
    wait_for(page, lambda: state(page) == "ready" and text(page, "dp") == "2048")
    # pp 1, ZeRO-2: weights 2 * 405.85e9 / 8 = 101.46 GB alone exceed 80 GB
    assert no_pipeline.get_attribute("aria-pressed") == "true"
    assert "exceeds 80" in text(page, "memory-note")


@pytest.mark.browser
def test_layouts_readable_on_laptop_screens(page: WebDriver) -> None:
    for width, height in ((LAPTOP_WIDTH, LAPTOP_HEIGHT), (1920, 1080)):
        page.set_window_size(width, height)
        overflow = page.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"horizontal scroll at {width}x{height}"
        memory, mfu = (page.find_element(By.ID, i).rect for i in ("memory-chart", "mfu-chart"))
        assert memory["x"] + memory["width"] <= mfu["x"], "charts side by side"
    page.set_window_size(LAPTOP_WIDTH, LAPTOP_HEIGHT)


def enumerated_plate_problem() -> SearchProblem:
    return resolve_space(plate_job(), SearchSpace(), "workshop")


def as_shown(layout: Layout) -> dict[str, str]:
    """A layout as the page's controls hold it."""
    return {
        "tp": str(layout.tp),
        "pp": str(layout.pp),
        "cp": str(layout.cp),
        "vpp": str(layout.vpp),
        "micro-batch": str(layout.micro_batch),
        "zero": str(layout.zero),
        "recompute": layout.recompute.value,
        "schedule": layout.schedule.value,
        "ep": str(layout.ep),
        "placement": ",".join(layout.placement),
    }


def dataset(browser: WebDriver, name: str) -> str:
    return str(browser.execute_script(f"return document.body.dataset.{name} || ''"))


@pytest.mark.browser
def test_optimise_fills_the_optimum_and_draws_the_frontier(page: WebDriver, tmp_path: Path) -> None:
    problem = enumerated_plate_problem()
    optimum = enumerator.best_layout(problem, CostAssumptions())  # the exhaustive oracle
    frontier = enumerator.frontier_points(problem, CostAssumptions())
    assert optimum is not None
    # the plate's engine-agnostic search, as the oracle enumerates it (the page searches
    # under the engine of its export panel)
    choose(page, "export-engine", "generic")
    choose(page, "tp", "16")
    wait_for(page, lambda: state(page) == "ready" and text(page, "mfu") == "16%")
    page.find_element(By.ID, "optimise").click()
    wait_for(
        page,
        lambda: (
            "error" in (dataset(page, "optimise"), dataset(page, "frontier"))
            or dataset(page, "frontier") == "done"
        ),
    )
    assert dataset(page, "frontier") == "done", text(page, "optimise-status")
    wait_for(page, lambda: state(page) == "ready" and shown_layout(page) == as_shown(optimum))
    # Llama 3's published layout is that optimum: the plate's 78.6 GB and 43% come back.
    assert (text(page, "total-memory"), text(page, "mfu")) == ("78.6 GB", "43%")
    assert "memory limit" in text(page, "binding")
    points = page.find_elements(By.CSS_SELECTOR, "#pareto-chart g.point")
    assert len(points) == len(frontier)
    shot = SCREENSHOT if os.environ.get(UPDATE_SCREENSHOT) else tmp_path / "workshop.png"
    save_screenshot(page, shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(shot.read_bytes()[16:20], "big") == LAPTOP_WIDTH  # the IHDR width
    # "load that layout" beside the memory rule: the enumerator's optimum without it, which
    # does not fit (pp 1: 101.46 GB of weights alone).
    unbounded = enumerator.best_layout(
        problem, CostAssumptions(), frozenset({enumerator.MEMORY_LIMIT})
    )
    assert unbounded is not None
    memory_rule = "//ul[@id='binding']/li[starts-with(normalize-space(.), 'memory limit')]"
    page.find_element(By.XPATH, memory_rule + "//button").click()
    wait_for(page, lambda: state(page) == "ready" and shown_layout(page) == as_shown(unbounded))
    assert "exceeds 80" in text(page, "memory-note")
    # "load the step": over every layout (no memory limit), the least memory among those that
    # beat the optimum's MFU (the plate: 84.9 GB at 43.1%).
    priced = enumerator.price_space(problem, CostAssumptions())
    valid = enumerator.feasible(problem, priced, frozenset({enumerator.MEMORY_LIMIT}))
    best_mfu = priced.mfu[valid].max(initial=0.0, where=priced.memory_bytes[valid] <= 80e9)
    step_gb = priced.memory_bytes[valid & (priced.mfu > best_mfu * (1 + 1e-6))].min() / 1e9
    page.find_element(
        By.XPATH, memory_rule + "//button[normalize-space(.)='load the step']"
    ).click()
    wait_for(
        page, lambda: state(page) == "ready" and text(page, "total-memory") == f"{step_gb:.1f} GB"
    )
    # Keyboard: the least-memory frontier point loads its layout on Enter.
    points = page.find_elements(By.CSS_SELECTOR, "#pareto-chart g.point")
    points[0].send_keys(Keys.ENTER)
    wait_for(
        page, lambda: state(page) == "ready" and shown_layout(page) == as_shown(frontier[0][2])
    )
    assert text(page, "total-memory") == f"{frontier[0][0] / 1e9:.1f} GB"
    # "load the layout without it" beside the optimum's interleaving: the enumerator's best
    # of the same request at vpp 1
    flat = resolve_space(plate_job(), SearchSpace(vpp=1), "workshop")
    without = enumerator.best_layout(flat, CostAssumptions())
    assert without is not None
    interleaving = "//ul[@id='choices']/li[starts-with(normalize-space(.), 'interleaving')]"
    assert "interleaving (vpp 4) buys" in page.find_element(By.XPATH, interleaving).text
    page.find_element(By.XPATH, interleaving + "//button").click()
    wait_for(page, lambda: state(page) == "ready" and shown_layout(page) == as_shown(without))


def save_screenshot(browser: WebDriver, path: Path) -> None:
    """The whole page at laptop width, as the README shows it."""
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": LAPTOP_WIDTH, "height": int(height), "deviceScaleFactor": 1, "mobile": False},
    )
    browser.execute_script("document.documentElement.style.overflow = 'hidden'")  # no scrollbar
    path.parent.mkdir(exist_ok=True)
    browser.save_screenshot(str(path))
    browser.execute_script("document.documentElement.style.overflow = ''")
    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


@pytest.mark.browser
def test_an_empty_binding_list_says_why_it_is_empty(page: WebDriver, api: TestClient) -> None:
    # under an optimum with no binding rule the page says why the list is empty, from the
    # answer's fields alone: every explanation worked out, some skipped for their size
    # (explanations_skipped), the time limit, or explanations not asked for. A real answer,
    # rendered by the page's own module with those fields set
    answer = api.post("/v1/optimize", json=SEARCH_EXAMPLE).json()
    assert answer["best"] is not None
    cases = {
        "No rule holds it back.": {"explanations_complete": True},
        "too large to search": {"explanations_skipped": ["node_size not relaxed: too large"]},
        "before the time limit": {},
        "not asked for": {"explained": False},
    }
    for expected, fields in cases.items():
        shown = {
            **answer,
            "binding": [],
            "explanations_complete": False,
            "explanations_skipped": [],
            "explained": True,
            **fields,
        }
        intro = page.execute_async_script(
            "const [answer, done] = arguments;"
            "import('/static/optimum.js').then((m) => {"
            "  m.renderOptimum(answer, () => {});"
            "  done(document.getElementById('binding-intro').textContent);"
            "});",
            shown,
        )
        assert expected in intro, (fields, intro)


# The page's own server side, without a browser: the choices helper and the static files.


def test_choices_mark_what_the_cost_model_refuses(api: TestClient, plate_body: dict) -> None:
    answer = api.post("/page/choices", json=plate_body)
    assert answer.status_code == 200
    pp = {choice["value"]: choice for choice in answer.json()["pp"]}
    # 16384 = 2**14, so pp is offered in powers of two up to 128; with vpp 4 every pp needs
    # pp * 4 <= 126 chunks of layers, or exactly 128 with the embedding and the loss a chunk
    # each (pp 32): pp 64 and 128 are refused, and pp 1 because interleaving needs a pipeline.
    assert sorted(pp) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert [value for value, choice in pp.items() if choice["valid"]] == [2, 4, 8, 16, 32]
    assert "exceed num_layers(126)" in pp[64]["reason"]
    assert "needs pp > 1" in pp[1]["reason"]
    # micro-batch 16 leaves 2048 / (128 * 16) = 1 micro-batch: valid; tp 16 is priced (warned)
    tp = {choice["value"]: choice["valid"] for choice in answer.json()["tp"]}
    assert tp[16] and answer.json()["micro_batch"][-1] == {
        "value": 16,
        "valid": True,
        "reason": None,
    }


def test_choices_of_a_bad_job_is_one_422(api: TestClient, plate_body: dict) -> None:
    plate_body["model"] = "llama-9000"
    answer = api.post("/page/choices", json=plate_body)
    assert answer.status_code == 422
    assert answer.json()["error"]["field"] == "model"


def test_page_and_assets_are_served_and_nothing_else(api: TestClient) -> None:
    page = api.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    texts = [page.text]
    for asset in ("app.js", "charts.js", "optimum.js", "style.css"):
        answer = api.get(f"/static/{asset}")
        assert answer.status_code == 200
        texts.append(answer.text)
    for name in ("page.py", "..%2Fpage.py", "missing.js"):
        answer = api.get(f"/static/{name}")
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "not_found"
    # offline: no script, style or font from another host (the SVG namespace is a name only)
    assert all("http" not in text.replace("http://www.w3.org/2000/svg", "") for text in texts)


@pytest.mark.browser
def test_standard_shows_the_band_the_measured_step_is_expected_in(page: WebDriver) -> None:
    assert not page.find_element(By.ID, "band").is_displayed()  # the plate's profile: none
    choose(page, "profile", "standard")
    wait_for(page, lambda: state(page) == "ready" and text(page, "band") != "")
    band = text(page, "band")
    assert band.startswith("80% band: "), band
    low, high = (float(x) for x in band.split(": ")[1].split(" s,")[0].split("–"))
    step = float(text(page, "step-time").removesuffix(" s"))
    assert low <= step <= high, (band, step)
    assert "published runs" in (page.find_element(By.ID, "band").get_attribute("title") or "")

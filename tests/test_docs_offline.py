"""/docs renders with no network: Swagger UI comes from the service itself, not a CDN. Headless
Chromium resolves no host but 127.0.0.1, so any asset from elsewhere fails to load."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from bench.server import free_port, start_server, stop_server
from tests.test_page_browser import CHROME_FLAGS, WAIT_S, browser_paths

pytestmark = pytest.mark.browser
NO_NETWORK = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"


@pytest.fixture(scope="module")
def offline_browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    chromium, driver_path = browser_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*CHROME_FLAGS, NO_NETWORK):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-offline')}")
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    with (tmp_path_factory.mktemp("docs-server") / "server.log").open("wb") as log:
        server = start_server(port, {"WORKERS": "1"}, log)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_server(server)


def test_the_network_is_blocked(offline_browser: webdriver.Chrome) -> None:
    # the premise: a CDN script cannot load in this browser
    offline_browser.get("about:blank")
    loaded = offline_browser.execute_async_script(
        """const done = arguments[0];
        const script = document.createElement("script");
        script.src = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js";
        script.onload = () => done(true); script.onerror = () => done(false);
        document.head.appendChild(script);"""
    )
    assert loaded is False


def test_docs_render_every_route_offline(offline_browser: webdriver.Chrome, served: str) -> None:
    offline_browser.get(f"{served}/docs")
    try:
        WebDriverWait(offline_browser, WAIT_S).until(
            lambda b: b.find_elements(By.CSS_SELECTOR, ".swagger-ui .opblock-summary-path")
        )
    except TimeoutException:
        pytest.fail("Swagger UI never rendered the operations: /docs depends on the network")
    title = offline_browser.find_element(By.CSS_SELECTOR, ".swagger-ui .info .title").text
    paths = {
        element.text.replace("\u200b", "")
        for element in offline_browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")
    }
    assert title.startswith("layoutopt")
    assert {"/v1/evaluate", "/v1/optimize", "/v1/pareto", "/healthz"} <= paths

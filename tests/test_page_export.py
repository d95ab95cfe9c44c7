"""The workshop page's export panel in headless Chromium against a real `layoutopt serve`:
the plate's layout written as Megatron-LM flags, or Megatron-LM's refusal with its reason.

Expected text is read off the layout itself (tp 8 is `--tensor-model-parallel-size 8`) and
off the engine's documented rule (docs/engines.md: ZeRO-2 needs Megatron-FSDP, exported only
at pp 1), never from the page.
"""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests import test_page_browser as shared
from tests.test_page_browser import choose, state, text, wait_for

# The same fixtures as the page's other tests: a real server, headless Chromium, and the
# page loaded with the plate's layout (tp 8, pp 16, vpp 4, ZeRO-2).
base_url = shared.base_url
browser = shared.browser
page = shared.page


def export_state(browser: WebDriver) -> str:
    return str(browser.execute_script("return document.body.dataset.export || ''"))


def shown(browser: WebDriver, element_id: str) -> bool:
    return bool(browser.find_element(By.ID, element_id).is_displayed())


def click_export(browser: WebDriver) -> str:
    browser.find_element(By.ID, "export-button").click()
    wait_for(browser, lambda: export_state(browser) in ("ready", "refused"))
    return export_state(browser)


@pytest.mark.browser
def test_megatron_refuses_the_plates_zero_2_and_says_why(page: WebDriver) -> None:
    assert text(page, "export-button") == "Export for Megatron-LM"
    assert click_export(page) == "refused"
    refusal = text(page, "export-error")
    assert refusal.startswith("Megatron-LM cannot run this layout")
    assert "zero 2 with pp 16" in refusal
    assert not shown(page, "export-result")


@pytest.mark.browser
def test_megatron_flags_for_the_plates_layout_at_zero_1(page: WebDriver) -> None:
    choose(page, "zero", "1")
    wait_for(page, lambda: state(page) == "ready")
    assert click_export(page) == "ready"
    flags = text(page, "export-text")
    assert "--tensor-model-parallel-size 8" in flags
    assert "--pipeline-model-parallel-size 16" in flags
    assert "--num-virtual-stages-per-pipeline-rank 4" in flags
    assert "--use-distributed-optimizer" in flags  # ZeRO-1 is Megatron's distributed optimizer
    assert not shown(page, "export-error")
    download = page.find_element(By.ID, "export-download")
    assert download.get_attribute("download") == "megatron_args.sh"
    assert (download.get_attribute("href") or "").startswith("blob:")
    page.find_element(By.ID, "export-copy").click()
    wait_for(page, lambda: text(page, "export-copied") != "")
    # a change of layout makes the artefact stale: it goes
    choose(page, "zero", "2")
    wait_for(page, lambda: state(page) == "ready")
    assert not shown(page, "export-result") and export_state(page) == ""


@pytest.mark.browser
def test_another_engine_names_its_button_and_writes_its_own_input(page: WebDriver) -> None:
    # torchtitan runs the plate as drawn (docs/engines.md): ZeRO-2 is FSDP2 without resharding
    choose(page, "export-engine", "torchtitan")
    assert text(page, "export-button") == "Export for torchtitan"
    assert click_export(page) == "ready"
    overrides = text(page, "export-text")
    assert "--parallelism.tensor_parallel_degree 8" in overrides
    assert "--parallelism.fsdp_reshard_after_forward never" in overrides
    download = page.find_element(By.ID, "export-download")
    assert download.get_attribute("download") == "torchtitan_args.sh"


@pytest.mark.browser
def test_optimise_searches_under_the_export_engine_so_its_layout_exports(page: WebDriver) -> None:
    # the plate's ZeRO-2 at pp 16 is refused by Megatron-LM (above): searched under
    # Megatron-LM's rules, the optimum is a layout its export writes
    assert page.find_element(By.ID, "export-engine").get_attribute("value") == "megatron"
    page.find_element(By.ID, "optimise").click()
    wait_for(page, lambda: shared.dataset(page, "optimise") in ("done", "error"))
    assert shared.dataset(page, "optimise") == "done", text(page, "optimise-status")
    wait_for(page, lambda: state(page) == "ready")
    assert click_export(page) == "ready"
    assert "--tensor-model-parallel-size" in text(page, "export-text")

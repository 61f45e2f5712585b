"""report.html in a real headless browser (Debian's chromium through Selenium): it renders offline.

`make test` installs chromium and chromedriver (the `browser` target) and sets
TOKENMASK_REQUIRE_BROWSER=1, so there a missing browser fails the test instead of skipping it.
"""

import json
import os
import shutil

import pytest
from test_report import full_study  # the suite imports test modules by basename (unique names)

from tokenmask.experiments.report import write_study_report
from tokenmask.experiments.runner import RECORD

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and DRIVER):
        if os.environ.get("TOKENMASK_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium and chromedriver are required here: make browser (apt-get install chromium chromium-driver)")
        pytest.skip("no chromium/chromedriver on this machine (make browser installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,900"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()


def loaded_page(browser, path):
    browser.get(path.as_uri())
    return {
        "tables": browser.execute_script("return document.querySelectorAll('table').length"),
        "cells": browser.execute_script("return [...document.querySelectorAll('td')].map(c => c.textContent)"),
        "images": browser.execute_script("return [...document.images].map(i => i.complete && i.naturalWidth > 0)"),
        "errors": [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"],
    }


def test_the_study_report_renders(browser, tmp_path):
    (tmp_path / RECORD).write_text(json.dumps(full_study()), encoding="utf-8")
    page = loaded_page(browser, write_study_report(tmp_path))
    # the budget, typo-0.1 against the baseline, span against token, pre-training
    assert page["tables"] == 4
    assert {"better", "+3.0 [+0.5, +5.5]", "too wide to tell", "token-0.15-bert"} <= set(page["cells"])
    assert page["images"] == [True, True]  # the downstream plot and the curves decoded, nothing fetched
    assert page["errors"] == []


def test_the_check_sees_a_broken_image(browser, tmp_path):
    """The test above could not pass by accident: a page with an image that cannot load is caught."""
    path = tmp_path / "broken.html"
    path.write_text('<!DOCTYPE html><html><body><img src="missing.png"></body></html>', encoding="utf-8")
    page = loaded_page(browser, path)
    assert page["images"] == [False]
    assert any("missing.png" in entry["message"] for entry in page["errors"])

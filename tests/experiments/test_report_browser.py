"""report.html in a real headless browser (Debian's chromium through Selenium): it renders offline.

`make test` installs chromium and chromedriver (the `browser` target) and sets
TOKENMASK_REQUIRE_BROWSER=1, so there a missing browser fails the test instead of skipping it.
"""

import os
import shutil

import pytest
from test_compare import fake_comparison  # the suite imports test modules by basename (unique names)
from test_study_report import downstream_study, pretraining_study  # noqa: F401 (fixtures)

from tokenmask.experiments.compare_report import write_compare_report
from tokenmask.experiments.report import Figure, Heading, Paragraph, Table, write_report
from tokenmask.experiments.study_report import write_study_report

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


def a_plot(path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(4, 3))
    axes.plot([0, 1, 2], [0.1, 0.25, 0.3], "o-")
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path


def loaded_page(browser, path):
    browser.get(path.as_uri())
    return {
        "tables": browser.execute_script("return document.querySelectorAll('table').length"),
        "cells": browser.execute_script("return [...document.querySelectorAll('td')].map(c => c.textContent)"),
        "images": browser.execute_script("return [...document.images].map(i => i.complete && i.naturalWidth > 0)"),
        "errors": [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"],
    }


def test_a_report_renders_with_its_tables_and_images(browser, tmp_path):
    parts = [
        Heading("results"),
        Paragraph("tokenmask study --output runs/study", note=True),
        Table(["strategy", "accuracy"], [["span", "0.301"], ["pmi", "0.312"]], caption="final accuracy"),
        Figure(a_plot(tmp_path / "a.png"), caption="accuracy against tokens"),
        Figure(a_plot(tmp_path / "b.png"), caption="by strategy"),
    ]
    page = loaded_page(browser, write_report(tmp_path / "report.html", "study", parts))
    assert page["tables"] == 1 and page["cells"] == ["span", "0.301", "pmi", "0.312"]
    assert page["images"] == [True, True]  # both embedded PNGs decoded, nothing fetched
    assert page["errors"] == []
    browser.save_screenshot(str(tmp_path / "report.png"))


def test_the_study_report_renders(browser, pretraining_study):  # noqa: F811
    page = loaded_page(browser, write_study_report(pretraining_study))
    assert page["tables"] == 2 and "token-0.15-bert" in page["cells"] and "0.1200 ± 0.0283" in page["cells"]
    assert len(page["images"]) == 2 and all(page["images"])  # the curves and the final metric by strategy and rate
    assert page["errors"] == []


def test_the_study_report_with_fine_tuning_renders(browser, downstream_study):  # noqa: F811
    page = loaded_page(browser, write_study_report(downstream_study))
    paragraphs = browser.execute_script("return [...document.querySelectorAll('p')].map(p => p.textContent)")
    assert paragraphs[0].startswith(
        "At 100 labels, continued pre-training with whole-word masking at 0.15 for 1.0M tokens raised"
    )
    # per budget against the baseline (2), typo-0.1, augmentation, masking, pre-training summary, cells, fine-tuning cells
    assert page["tables"] == 8 and "+4.0 [1.5, 6.5]" in page["cells"] and "better" in page["cells"]
    assert len(page["images"]) == 3 and all(page["images"])  # the task's metric by tokens, the final scores, the curves
    assert page["errors"] == []


def test_the_comparison_report_renders(browser, tmp_path):
    write_compare_report(fake_comparison(tmp_path / "cmp"))
    page = loaded_page(browser, tmp_path / "cmp" / "report.html")
    assert page["tables"] >= 3 and "adaptive-0.1" in page["cells"]  # clean, corrupted and runs tables
    assert len(page["images"]) == 2 and all(page["images"])  # metric by training-set size, clean against corrupted
    assert page["errors"] == []


def test_the_check_sees_a_broken_image(browser, tmp_path):
    """The test above could not pass by accident: a page with an image that cannot load is caught."""
    path = tmp_path / "broken.html"
    path.write_text('<!DOCTYPE html><html><body><img src="missing.png"></body></html>', encoding="utf-8")
    page = loaded_page(browser, path)
    assert page["images"] == [False]
    assert any("missing.png" in entry["message"] for entry in page["errors"])

"""The dashboard as a user sees it: MLflow's UI started on a free localhost port over the store of a finished grid,
opened in headless Chromium (Debian's chromium and chromium-driver, driven by selenium): the address the launcher
prints opens the training side with the project's columns, the launch's run holds its cells, each run (at the
address the report links it to) shows its status and final accuracy, and the grid's report is there as artifacts of
the summary run, in an experiment of its own.

AMDNN_DASHBOARD_SCREENSHOTS=DIR keeps the pages as PNGs in DIR (docs/ holds the ones docs/dashboard.md shows).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SHOTS = os.environ.get("AMDNN_DASHBOARD_SCREENSHOTS")
MAX_PNG_BYTES = 300 * 1024
WAIT_S = 90   # the UI renders in seconds on an idle machine; the 2-core CI machine may be busy


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def report_run(finished_grid) -> str:
    """The experiment's summary run, where the local sweep logged its report (orchestrator.report.summary_run)."""
    from orchestrator.report.summary_run import find_summary_run, report_experiment

    client = finished_grid.client()
    run = find_summary_run(client, client.get_experiment_by_name(report_experiment("amdnn")).experiment_id)
    assert run is not None, "the local sweep logged no report run"
    return run.info.run_id


@pytest.fixture(scope="module")
def dashboard(finished_grid, report_run):
    """`mlflow ui` on a free localhost port over the grid's store; its base URL."""
    port = _free_port()
    mlflow = Path(sys.executable).with_name("mlflow")
    server = subprocess.Popen([str(mlflow), "ui", "--backend-store-uri", finished_grid.uri, "--host", "127.0.0.1",
                               "--port", str(port), "--workers", "1"], cwd=finished_grid.root,
                              # no job runners: eight more processes importing MLflow, for jobs no test asks of it
                              env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert server.poll() is None, f"mlflow ui exited with {server.returncode}"
            assert time.monotonic() < deadline, "mlflow ui did not answer /health within 120 s"
            time.sleep(1)
        yield base
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # its own session: the server and its worker
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def browser():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: apt-get install chromium chromium-driver (tests/run.sh installs "
                    "them when run as root)", pytrace=False)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,800", "--lang=en-US"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def _open(browser, url: str | None, *expected: str, switch: bool = True) -> str:
    """Open `url` (None: stay on the page) and wait until the page's text holds every `expected` string; the text.
    `switch`: then choose MLflow's training side, where the address does not."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    if url is not None:
        browser.get(url)
    text = ""

    def shown(driver) -> bool:
        nonlocal text
        text = driver.find_element(By.TAG_NAME, "body").text
        return all(e in text for e in expected)

    try:
        WebDriverWait(browser, WAIT_S, poll_frequency=0.5).until(shown)
    except Exception:  # noqa: BLE001 - say what was missing and what was there
        raise AssertionError(f"{url} never showed {[e for e in expected if e not in text]}; it showed:\n"
                             f"{text[:3000]}") from None
    for button in browser.find_elements(By.CSS_SELECTOR, "button[aria-label='Close']"):  # the assistant's panel
        if button.is_displayed():
            button.click()
    for mode in browser.find_elements(By.XPATH, "//*[normalize-space(text())='Model training']") if switch else []:
        if mode.is_displayed():  # MLflow 3 opens on its GenAI side; training runs belong to the other
            mode.click()
            break
    return text


def _screenshot(browser, name: str, tmp_path: Path) -> None:
    """Keep the page as a palette PNG (< 300 KB); into AMDNN_DASHBOARD_SCREENSHOTS too when it is set."""
    from PIL import Image

    time.sleep(1)  # the panel closing and the charts settling
    raw = tmp_path / f"raw-{name}"
    browser.save_screenshot(str(raw))
    out = tmp_path / name
    Image.open(raw).convert("RGB").quantize(colors=128).save(out, optimize=True)
    assert 10_000 < out.stat().st_size < MAX_PNG_BYTES, (name, out.stat().st_size)
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, Path(SHOTS) / name)


def test_the_launch_address_opens_the_training_view_with_the_projects_columns(finished_grid, dashboard, browser,
                                                                               tmp_path):
    from selenium.webdriver.common.by import By

    from orchestrator.tracking.dashboard import VIEW_NAME, runs_url

    runs = finished_grid.runs()
    digest = runs[0].inputs.dataset_inputs[0].dataset.digest
    exp = finished_grid.client().get_experiment_by_name("amdnn").experiment_id
    launch = "launch lenet300 x native,am16 (digits), 2 cells"
    # The address the launcher prints: no click on MLflow's GenAI / training switch.
    url = runs_url(dashboard, exp)
    assert url.split("/#")[1] in finished_grid.output
    browser.set_window_size(2000, 800)  # the table renders the columns in view only: all of them in view
    text = _open(browser, url, launch, VIEW_NAME, "AMDNN grid: each run is one cell", switch=False)
    header = browser.find_element(By.CSS_SELECTOR, ".ag-header").text
    for column in ("final_test_accuracy", "amdnn.model", "amdnn.mult", "amdnn.dataset", "amdnn.seed",
                   "train.epochs", "Dataset"):
        assert column in header, header
    assert "report" not in text.split("\n") and "3 matching runs" in text, text[:3000]  # the launch and its cells
    assert not any(r.info.run_name[:20] in text for r in runs), text[:3000]  # nested in the launch's run, closed
    (expander,) = browser.find_elements(By.CSS_SELECTOR, "[data-component-id$='runnamecellrenderer.tsx_46']")
    expander.click()  # the launch's run, opened: its cells, with their accuracy
    text = _open(browser, None, *(r.info.run_name[:20] for r in runs), f"digits ({digest[:20]}", switch=False)
    for run in runs:
        assert f"{run.data.metrics['final_test_accuracy']:.4f}"[:5] in text, text[:3000]
    _screenshot(browser, "dashboard-runs.png", tmp_path)
    browser.set_window_size(1280, 800)


def test_each_run_shows_its_status_accuracy_and_tags(finished_grid, dashboard, browser, report_run, tmp_path):
    from orchestrator.tracking.dashboard import run_url

    for run in sorted(finished_grid.runs(), key=lambda r: r.info.run_name):
        accuracy = run.data.metrics["final_test_accuracy"]  # at the address the report links the run to
        text = _open(browser, run_url(dashboard, run.info.run_id), run.info.run_name,
                     "final_test_accuracy", "amdnn.device", "amdnn.ops_build")
        assert "Finished" in text
        assert re.search(rf"final_test_accuracy\s+{str(accuracy)[:6]}", text), text[-3000:]
        assert f"amdnn.mult\n: {run.data.tags['amdnn.mult']}" in text
    _screenshot(browser, "dashboard-run.png", tmp_path)


def test_the_grid_report_is_an_artifact_with_the_runs_accuracies(finished_grid, dashboard, browser, report_run,
                                                                 tmp_path):
    from orchestrator.report.summary_run import report_experiment

    exp = finished_grid.client().get_experiment_by_name(report_experiment("amdnn")).experiment_id
    accuracies = {r.data.tags["amdnn.mult"]: r.data.metrics["final_test_accuracy"] for r in finished_grid.runs()}
    text = _open(browser, f"{dashboard}/#/experiments/{exp}/runs/{report_run}/artifacts/report/report.md",
                 "report.csv", "report.html", "heatmap-digits.png", "Final test accuracy (digits)")
    row = re.search(r"lenet300\n(0\.\d{4})\n(0\.\d{4})", text)
    assert row, text[-2000:]
    assert [float(v) for v in row.groups()] == [round(accuracies["native"], 4), round(accuracies["am16"], 4)]
    _screenshot(browser, "dashboard-report.png", tmp_path)

"""The dashboard as a user sees it: MLflow's UI started on a free localhost port over the store of a finished grid,
opened in headless Chromium (Debian's chromium and chromium-driver, driven by selenium): the runs are listed with
their dataset, each run shows its status and final accuracy, and the grid's report is there as artifacts of the
experiment's summary run.

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
    from orchestrator.report.summary_run import find_summary_run

    client = finished_grid.client()
    run = find_summary_run(client, client.get_experiment_by_name("amdnn").experiment_id)
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


def _open(browser, url: str, *expected: str) -> str:
    """Open `url` and wait until the page's text holds every `expected` string; the text."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

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
    for mode in browser.find_elements(By.XPATH, "//*[normalize-space(text())='Model training']"):
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


def test_the_runs_are_listed_with_their_dataset(finished_grid, dashboard, browser, report_run, tmp_path):
    runs = finished_grid.runs()
    digest = runs[0].inputs.dataset_inputs[0].dataset.digest
    exp = finished_grid.client().get_experiment_by_name("amdnn").experiment_id
    text = _open(browser, f"{dashboard}/#/experiments/{exp}/runs", *(r.info.run_name[:20] for r in runs),
                 "report", f"digits ({digest[:20]}", "AMDNN grid: each run is one cell")
    assert text.count(f"digits ({digest[:20]}") == len(runs), text[:3000]  # the Dataset column, one per cell
    assert re.search(rf"{len(runs) + 1} matching runs", text), text[-500:]
    _screenshot(browser, "dashboard-runs.png", tmp_path)


def test_each_run_shows_its_status_accuracy_and_tags(finished_grid, dashboard, browser, report_run, tmp_path):
    exp = finished_grid.client().get_experiment_by_name("amdnn").experiment_id
    for run in sorted(finished_grid.runs(), key=lambda r: r.info.run_name):
        accuracy = run.data.metrics["final_test_accuracy"]
        text = _open(browser, f"{dashboard}/#/experiments/{exp}/runs/{run.info.run_id}", run.info.run_name,
                     "final_test_accuracy", "amdnn.device", "amdnn.ops_build")
        assert "Finished" in text
        assert re.search(rf"final_test_accuracy\s+{str(accuracy)[:6]}", text), text[-3000:]
        assert f"amdnn.mult\n: {run.data.tags['amdnn.mult']}" in text
    _screenshot(browser, "dashboard-run.png", tmp_path)


def test_the_grid_report_is_an_artifact_with_the_runs_accuracies(finished_grid, dashboard, browser, report_run,
                                                                 tmp_path):
    exp = finished_grid.client().get_experiment_by_name("amdnn").experiment_id
    accuracies = {r.data.tags["amdnn.mult"]: r.data.metrics["final_test_accuracy"] for r in finished_grid.runs()}
    text = _open(browser, f"{dashboard}/#/experiments/{exp}/runs/{report_run}/artifacts/report/report.md",
                 "report.csv", "report.html", "heatmap-digits.png", "Final test accuracy (digits)")
    row = re.search(r"lenet300\n(0\.\d{4})\n(0\.\d{4})", text)
    assert row, text[-2000:]
    assert [float(v) for v in row.groups()] == [round(accuracies["native"], 4), round(accuracies["am16"], 4)]
    _screenshot(browser, "dashboard-report.png", tmp_path)

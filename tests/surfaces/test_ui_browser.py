"""The web UI in a real browser: Debian's chromium driven by Selenium through chromedriver.

One `distrun ui` server (a real subprocess on a free loopback port) over one DISTRUN_HOME with
real jobs: a completed and a failed 4-rank job, a job that logs metrics through MLflow, and jobs
started while the page is open. Screenshots are saved in the test's temporary folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

from distrun.store.index import JobIndex
from support.cli import cli_env
from support.jobs import four_rank_job, processes_of_job, python_ranks

# One worker runs this module, so its module-scoped server and jobs start once (tests/README.md).
pytestmark = pytest.mark.xdist_group("ui_browser")

WAIT = 90  # seconds: the machine may be loaded
FAILING = (
    "r = int(os.environ['RANK']); time.sleep(0.3); "
    "r == 2 and (_ for _ in ()).throw(ValueError('bad batch on rank 2')); time.sleep(20)"
)
METRICS = """
    import mlflow
    for step in range(5):
        mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
    print("logged", flush=True)
"""


def chromium_paths() -> tuple[str, str]:
    browser = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    assert browser and driver, "chromium and chromium-driver are installed by scripts/deps/60-ui.sh"
    return browser, driver


class Jobs:
    def __init__(self, home: Path, base: Path) -> None:
        self.home = home
        self.base = base
        self.count = 0

    def write(self, yaml_text: str, files: dict[str, str] | None = None) -> Path:
        self.count += 1
        folder = self.base / f"job{self.count}"
        (folder / "src").mkdir(parents=True)
        for name, text in (files or {}).items():
            (folder / "src" / name).write_text(textwrap.dedent(text))
        job = folder / "job.yml"
        job.write_text(textwrap.dedent(yaml_text))
        return job

    def cli(self, *args: str, mlflow: bool = False) -> subprocess.CompletedProcess[str]:
        env = cli_env(self.home, {"DISTRUN_MLFLOW": "1" if mlflow else "0"})
        return subprocess.run(
            [sys.executable, "-m", "distrun", *args], capture_output=True, text=True, timeout=300, env=env
        )

    def status(self, name: str) -> str:
        return JobIndex(self.home / "jobs.db").get(name).status


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Jobs:
    base = tmp_path_factory.mktemp("browser")
    jobs = Jobs(base / "home", base)
    jobs.cli("run", str(jobs.write(python_ranks("print('all good', flush=True)"))), "--name", "done_job")
    failing = jobs.write(python_ranks(FAILING, grace=2) + "    display_name: four-rank failure\n")
    jobs.cli("run", str(failing), "--name", "failed_job")
    metrics = jobs.write("command: python train.py\ncode: src\nexperiment_name: browser\n", {"train.py": METRICS})
    jobs.cli("run", str(metrics), "--name", "metrics_job", mlflow=True)
    assert [jobs.status(n) for n in ("done_job", "failed_job", "metrics_job")] == ["Completed", "Failed", "Completed"]
    return jobs


@pytest.fixture(scope="module")
def printed_url(jobs: Jobs) -> Iterator[str]:
    """The URL `distrun ui` prints, its token included."""
    server = subprocess.Popen(
        [sys.executable, "-m", "distrun", "ui", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cli_env(jobs.home),
    )
    try:
        line = server.stdout.readline() if server.stdout else ""
        assert line.startswith("distrun ui: http://127.0.0.1:") and "/?token=" in line, line
        yield line.split(": ", 1)[1].strip()
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def ui_url(printed_url: str) -> str:
    return printed_url.split("/?token=", 1)[0]


@pytest.fixture(scope="module")
def browser(printed_url: str) -> Iterator[WebDriver]:
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not try to download a driver
    binary, driver_path = chromium_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1500",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        driver.get(printed_url)  # as the user does: the token becomes the page's cookie
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def shot(browser: WebDriver, tmp_path: Path) -> Callable[[str], Path]:
    def save(name: str) -> Path:
        path = tmp_path / f"{name}.png"
        assert browser.save_screenshot(str(path))
        return path

    return save


def wait_until(browser: WebDriver, condition: Callable[[WebDriver], object], what: str) -> object:
    return WebDriverWait(browser, WAIT, poll_frequency=0.2).until(condition, message=what)


def text_of(browser: WebDriver, css: str) -> str:
    """An element's text; "" while it is missing or being replaced (htmx swaps the status part)."""
    try:
        found = browser.find_elements(By.CSS_SELECTOR, css)
        return found[0].text if found else ""
    except StaleElementReferenceException:
        return ""


def click(browser: WebDriver, css: str) -> None:
    def clicked(b: WebDriver) -> bool:
        try:
            b.find_element(By.CSS_SELECTOR, css).click()
        except StaleElementReferenceException:
            return False
        return True

    wait_until(browser, clicked, f"a click on {css}")


def test_list_shows_completed_and_failed_job(browser: WebDriver, ui_url: str, shot: Callable[[str], Path]) -> None:
    browser.get(ui_url + "/")
    wait_until(browser, lambda b: b.find_elements(By.CSS_SELECTOR, 'tr[data-name="failed_job"]'), "job rows")
    statuses = {
        row.get_attribute("data-name"): row.get_attribute("data-status")
        for row in browser.find_elements(By.CSS_SELECTOR, "tr.job-row")
    }
    assert statuses["done_job"] == "Completed" and statuses["failed_job"] == "Failed"
    assert "four-rank failure" in browser.find_element(By.CSS_SELECTOR, 'tr[data-name="failed_job"]').text
    Select(browser.find_element(By.ID, "status-filter")).select_by_value("Failed")
    wait_until(browser, lambda b: not b.find_elements(By.CSS_SELECTOR, 'tr[data-name="done_job"]'), "filtered list")
    assert browser.find_elements(By.CSS_SELECTOR, 'tr[data-name="failed_job"]')
    shot("jobs-list")


def test_failed_job_page_shows_root_cause_rank_and_traceback(
    browser: WebDriver, ui_url: str, shot: Callable[[str], Path]
) -> None:
    browser.get(ui_url + "/jobs/failed_job")
    assert browser.find_element(By.ID, "job-status").text == "Failed"
    assert browser.find_element(By.ID, "root-cause").text == "rank_2"
    traceback = browser.find_element(By.ID, "failure-traceback").text
    assert "Traceback (most recent call last)" in traceback and "ValueError: bad batch on rank 2" in traceback
    failed_rows = browser.find_elements(By.CSS_SELECTOR, "tr.rank-row.state-failed")
    assert [r.get_attribute("data-name") for r in failed_rows] == ["rank_2"]
    shot("failed-job")
    browser.find_element(By.ID, "failure-log").click()
    wait_until(browser, lambda b: "ValueError: bad batch on rank 2" in text_of(b, "#log-view"), "rank 2's log")
    assert Select(browser.find_element(By.ID, "log-choice")).first_selected_option.get_attribute("value") == (
        "std_log_process_02.txt"
    )
    assert "[" not in text_of(browser, "#log-view").splitlines()[0]  # one rank's log: no prefixes


def test_live_log_shows_a_line_printed_after_the_page_loaded(
    browser: WebDriver, ui_url: str, jobs: Jobs, tmp_path: Path, shot: Callable[[str], Path]
) -> None:
    go = tmp_path / "go"
    body = (
        f"print('waiting', flush=True); "
        f"[time.sleep(0.1) for _ in range(3000) if not os.path.exists({str(go)!r})]; "
        f"print('late line from rank', os.environ['RANK'], flush=True)"
    )
    created = jobs.cli("job", "create", "--file", str(jobs.write(python_ranks(body))), "--name", "live_job")
    assert created.returncode == 0, created.stderr
    browser.get(ui_url + "/jobs/live_job")
    wait_until(browser, lambda b: "waiting" in text_of(b, "#log-view"), "the first lines")
    assert "late line" not in text_of(browser, "#log-view")
    go.touch()  # only now do the ranks print their last line
    wait_until(browser, lambda b: "late line from rank 3" in text_of(b, "#log-view"), "the late line")
    assert "[1/3] late line from rank 3" in text_of(browser, "#log-view")
    wait_until(browser, lambda b: text_of(b, "#job-status") == "Completed", "the job's end")
    shot("live-log")


def test_metric_chart_has_the_logged_points(browser: WebDriver, ui_url: str, shot: Callable[[str], Path]) -> None:
    browser.get(ui_url + "/jobs/metrics_job")
    wait_until(browser, lambda b: b.find_elements(By.CSS_SELECTOR, 'svg.chart[data-metric="loss"]'), "the chart")
    points = browser.find_elements(By.CSS_SELECTOR, 'svg.chart[data-metric="loss"] circle.point')
    seen = sorted((int(p.get_attribute("data-step")), float(p.get_attribute("data-value"))) for p in points)
    assert seen == [(step, 1.0 / (step + 1)) for step in range(5)]
    shot("metrics")


def test_sweep_page_follows_its_trials_to_the_end(
    browser: WebDriver, ui_url: str, jobs: Jobs, tmp_path: Path, shot: Callable[[str], Path]
) -> None:
    go = tmp_path / "go"
    sweep = jobs.write(
        "type: sweep\ntrial:\n  command: python wait.py ${{search_space.x}}\n  code: src\n"
        "search_space:\n  x: {type: choice, values: [1, 2]}\nsampling_algorithm: grid\n"
        "objective: {goal: maximize, primary_metric: acc}\nlimits: {max_total_trials: 2, trial_timeout: 120}\n",
        {"wait.py": f"import os, time\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.1)\n"},
    )
    name = f"sweep_{os.getpid()}_{int(time.time())}"
    started = jobs.cli("run", "-d", str(sweep), "--name", name)
    assert started.returncode == 0, started.stdout + started.stderr
    browser.get(ui_url + f"/jobs/{name}")

    def trial_states(b: WebDriver) -> list[str]:
        try:
            return [r.get_attribute("class") for r in b.find_elements(By.CSS_SELECTOR, "tr.trial-row")]
        except StaleElementReferenceException:
            return []

    wait_until(browser, lambda b: len([c for c in trial_states(b) if "state-running" in c]) == 2, "two running trials")
    go.touch()  # only now do the trials end: the page shows it without a reload
    # Untracked here, no trial is ranked: the sweep ends Failed, its trials Completed.
    wait_until(browser, lambda b: text_of(b, "#job-status") == "Failed", "the sweep's end")
    assert all("state-completed" in c for c in trial_states(browser)) and len(trial_states(browser)) == 2
    shot("sweep")
    click(browser, f'a[href="/jobs/{name}.trial_0"]')
    wait_until(browser, lambda b: "Trial trial_0 of sweep" in text_of(b, "#pipeline-link"), "the trial's page")


def test_cancel_button_stops_a_running_job(
    browser: WebDriver, ui_url: str, jobs: Jobs, shot: Callable[[str], Path]
) -> None:
    job = jobs.write(four_rank_job("python -c \"import time; print('sleeping', flush=True); time.sleep(300)\""))
    name = f"cancel_{os.getpid()}_{int(time.time())}"  # unique: processes are found by job name
    assert jobs.cli("job", "create", "--file", str(job), "--name", name).returncode == 0
    browser.get(ui_url + f"/jobs/{name}")
    wait_until(browser, lambda b: text_of(b, "#job-status") == "Running", "Running")
    wait_until(browser, lambda b: "sleeping" in text_of(b, "#log-view"), "the ranks' first lines")
    click(browser, "#cancel-button")
    wait_until(browser, lambda b: text_of(b, "#job-status") == "Canceled", "Canceled")
    assert jobs.status(name) == "Canceled"
    give_up = time.monotonic() + WAIT
    while processes_of_job(name) and time.monotonic() < give_up:
        time.sleep(0.2)
    assert processes_of_job(name) == []
    shot("canceled")

"""`recon serve` in a real browser: headless Chromium and chromedriver from Debian's
packages (a browser build downloaded at install time does not run on these machines).

The fixture installs them when they are missing and it runs as root (as on a fresh CI
machine), and fails, never skips, when it cannot. Screenshots go to tests/artifacts (or
$RECON_TEST_ARTIFACTS); docs/web.md shows the ones this test writes, copied there when
RECON_UPDATE_DOC_IMAGES=1.
"""

from __future__ import annotations

import html
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.desired.matrix import sweep_of
from tests.local.serving import ROOT, artifacts, example_project, recon, serving, settle
from tests.local.test_mermaid import installed_checker, mermaid_of
from tests.programs import apt_install

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
DOC_IMAGES = ROOT / "docs" / "images"
RUNS = ["actor-learner", "prepare", "train", "evaluate", "seeds", "compare"]  # seeds: a sweep


def _install_chromium() -> None:
    """Debian's chromium and chromium-driver, installed as root when missing."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        apt_install("chromium", "chromium-driver", why="the browser tests need Debian's chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    _install_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1400,1100", "--disable-gpu"):  # fmt: skip
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait_until(what: Callable[[], Any], timeout: float = 60, why: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {timeout} s: {why}"
        time.sleep(0.2)


def nodes(driver: Any) -> dict[str, dict[str, str]]:
    """Each run's node in the drawn graph: its sync and health, and its text."""
    script = """
      return Array.from(document.querySelectorAll('#graph g.node[data-kind="run"]')).map(
        (g) => [g.dataset.name, g.dataset.sync, g.dataset.health, g.textContent]);
    """
    return {
        name: {"sync": sync, "health": health, "text": text}
        for name, sync, health, text in driver.execute_script(script)
    }


def console_errors(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def screenshot(driver: Any, name: str) -> Path:
    path = artifacts() / name
    driver.get_screenshot_as_file(str(path))
    if os.environ.get("RECON_UPDATE_DOC_IMAGES") == "1":
        DOC_IMAGES.mkdir(exist_ok=True)
        shutil.copyfile(path, DOC_IMAGES / name)
    return path


def test_the_page_shows_every_run_its_details_and_a_job_ending_without_a_reload(
    browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    root = example_project(tmp_path)
    with serving(root, "--interval", "1s") as served:
        browser.get(served.url + "/")
        before = wait_until(lambda: len(nodes(browser)) == len(RUNS) and nodes(browser),
                            why="the graph drawn")  # fmt: skip
        assert {name: node["sync"] for name, node in before.items()} == dict.fromkeys(
            RUNS, "never run"
        )
        assert all("never run" in node["text"] for node in before.values())
        assert not browser.find_element(By.ID, "cost-section").is_displayed()  # no job yet
        screenshot(browser, "serve-before-apply.png")
        # The page is kept: a reload would lose this mark.
        browser.execute_script("window.reconMark = 'same page';")

        applied = recon(root, "apply", ".", "--auto-approve")
        assert applied.returncode == 0, applied.stdout + applied.stderr
        healths = settle(root)  # a sweep's members each have a row of their own
        assert {sweep_of(name) or name for name in healths} == set(RUNS)
        assert set(healths.values()) == {"succeeded"}
        # The next pass records the endings and writes each run's provenance manifest.
        again = recon(root, "apply", ".", "--auto-approve")
        assert again.returncode == 0, again.stdout + again.stderr
        after = wait_until(
            lambda: (
                (seen := nodes(browser))
                and all(node["health"] == "succeeded" for node in seen.values())
                and seen
            ),
            why="every run shown succeeded",
        )
        assert {name: node["sync"] for name, node in after.items()} == dict.fromkeys(
            RUNS, "current"
        )
        assert all("current · succeeded" in node["text"] for node in after.values())
        assert browser.execute_script("return window.reconMark;") == "same page"
        # The jobs ended with what they held recorded: the cost card shows (CPUs only here).
        wait_until(lambda: browser.find_element(By.ID, "cost-section").is_displayed(),
                   why="the cost card shown")  # fmt: skip
        card = browser.find_element(By.ID, "cost").text
        assert "current successes" in card and "total" in card, card

        browser.find_element(By.CSS_SELECTOR, '#graph g.node[data-name="prepare"]').click()
        wait_until(lambda: browser.find_element(By.ID, "details-name").text == "prepare",
                   why="the run's details")  # fmt: skip
        reason = wait_until(lambda: browser.find_element(By.ID, "details-reason").text)
        # Said once, as `recon status` says it: not "current, succeeded. no-op: current (...)".
        assert reason.startswith("current (job ") and reason.endswith(" succeeded)"), reason
        cost = browser.find_element(By.ID, "details-cost").text
        assert cost.startswith("Cost: - GPU-h, ") and "CPU-h over 1 job (current successes" in cost
        log = wait_until(lambda: browser.find_element(By.ID, "details-log").text)
        assert "wrote 200 episodes to " in log and log.endswith(
            "/runs/prepare/data/.recon-staging/episodes.csv"  # where the job wrote it
        )
        spec = browser.find_element(By.ID, "details-spec").text
        assert "name: prepare" in spec

        def manifest_text() -> str:
            text: str = browser.find_element(By.ID, "details-manifest").text
            return text if '"run": "prepare"' in text else ""

        manifest = wait_until(manifest_text, why="the manifest shown")
        assert '"exit_code": 0' in manifest
        screenshot(browser, "serve-run-details.png")
        assert console_errors(browser) == []
        browser.get("about:blank")  # before the server stops: its stream would complain


def test_the_pr_comment_diagram_renders_with_mermaid(browser: Any, tmp_path: Path) -> None:
    """The diagram `recon plan --format markdown` puts in a PR comment, drawn by mermaid
    itself (the package tests/mermaid pins) as GitHub draws it; docs/web.md shows it."""
    from selenium.webdriver.common.by import By

    console_errors(browser)  # reading the log empties it: what came before is not this test's
    root = example_project(tmp_path)
    comment = recon(root, "plan", ".", "--format", "markdown")
    assert comment.returncode == 0, comment.stderr
    diagram = mermaid_of(comment.stdout)
    script = installed_checker().parent / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
    page = tmp_path / "comment.html"
    page.write_text(
        "<!doctype html><html><body style='background:#fff'>"
        f"<script src='{script.as_uri()}'></script>"
        f"<pre class='mermaid' id='diagram'>{html.escape(diagram)}</pre>"
        "<script>mermaid.initialize({startOnLoad: false});"
        "mermaid.run({querySelector: '#diagram'}).then("
        "() => { document.body.dataset.done = 'ok'; },"
        "(e) => { document.body.dataset.done = 'error: ' + e; });</script>"
        "</body></html>"
    )
    browser.get(page.as_uri())
    done = wait_until(lambda: browser.find_element(By.TAG_NAME, "body").get_attribute("data-done"))
    assert done == "ok"
    labels = browser.find_element(By.CSS_SELECTOR, "#diagram svg").text
    for run in RUNS:
        assert run in labels
    assert "submit" in labels
    element = browser.find_element(By.CSS_SELECTOR, "#diagram svg")
    path = artifacts() / "pr-comment-diagram.png"
    element.screenshot(str(path))
    if os.environ.get("RECON_UPDATE_DOC_IMAGES") == "1":
        DOC_IMAGES.mkdir(exist_ok=True)
        shutil.copyfile(path, DOC_IMAGES / path.name)
    assert console_errors(browser) == []


# A project with no allocation, and a sweep one member of which fails (exit 3).
SWEEP_PROJECT = {
    "recon.yaml": "project: sweepy\nscheduler: local\n",
    "specs/runs.yaml": (
        "kind: Run\nname: prepare\ncommand: echo data > {outputs.data.path}\n"
        "outputs:\n  data: data.txt\n"
        "---\n"
        "kind: Run\nname: fit\nmatrix:\n  i: [1, 2, 10]\n"
        "command: test {matrix.i} != 2 || exit 3; cat {inputs.data.path} > {outputs.model.path}\n"
        "inputs:\n  data: prepare.data\noutputs:\n  model: model.txt\n"
    ),
}


def test_a_sweep_clicked_shows_its_members_and_a_failure_is_red(
    browser: Any, tmp_path: Path
) -> None:
    """A sweep's node opens the sweep (its members by value, each clickable), the run
    table gathers them under one row, a failed member makes the sweep's node red, a
    project without allocations shows no card for them, and the sync column stays on one
    line."""
    from selenium.webdriver.common.by import By

    from tests.gitrepo import GitRepo

    console_errors(browser)  # what came before is not this test's
    repo = GitRepo(tmp_path / "sweepy")
    repo.commit(SWEEP_PROJECT)
    root = repo.root
    assert recon(root, "apply", ".", "--auto-approve").returncode == 0
    assert settle(root)["fit[i=2]"] == "failed"
    assert recon(root, "apply", ".", "--auto-approve").returncode == 0  # records the endings
    with serving(root, "--interval", "1s") as served:
        browser.get(served.url + "/")
        drawn = wait_until(lambda: "fit" in (seen := nodes(browser)) and seen, why="the graph")
        assert drawn["fit"]["health"] == "failed"  # one member of three: the sweep is red
        rect = browser.find_element(By.CSS_SELECTOR, '#graph g.node[data-name="fit"] rect')
        assert (rect.get_attribute("fill"), rect.get_attribute("stroke")) == (
            "#fbd5d5",
            "#c53030",
        )
        assert rect.get_attribute("stroke-width") == "4"
        assert not browser.find_element(By.ID, "allocations-section").is_displayed()

        # The run table: the sweep one row, its members under it once opened.
        rows = browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
        shown = [row.get_attribute("data-name") for row in rows if row.is_displayed()]
        assert shown == ["prepare", "fit"]
        sweep_row = browser.find_element(By.CSS_SELECTOR, "#runs tr.sweep")
        assert "fit (3 members)" in sweep_row.text and "failed" in sweep_row.text
        sweep_row.find_element(By.CSS_SELECTOR, "button.toggle").click()
        members = wait_until(
            lambda: [r.get_attribute("data-name") for r in browser.find_elements(
                By.CSS_SELECTOR, "#runs tr.member") if r.is_displayed()],
            why="the sweep's members opened",
        )  # fmt: skip
        assert members == ["fit[i=1]", "fit[i=2]", "fit[i=10]"]
        # "never run" on one line: its text makes one line box, however tall the row.
        lines = browser.execute_script(
            "return Array.from(document.querySelectorAll('#runs tr td:nth-child(2)')).map("
            "(td) => { const r = document.createRange(); r.selectNodeContents(td);"
            " const tops = Array.from(r.getClientRects(), (b) => b.top);"
            " return [td.textContent, new Set(tops).size]; });"
        )
        assert ["never run", 1] in lines and {count for _text, count in lines} == {1}, lines

        browser.find_element(By.CSS_SELECTOR, '#graph g.node[data-name="fit"]').click()
        wait_until(lambda: browser.find_element(By.ID, "details-name").text.startswith(
            "sweep fit"), why="the sweep's details")  # fmt: skip
        assert browser.find_element(By.ID, "details-sweep").is_displayed()
        assert not browser.find_element(By.ID, "details-run").is_displayed()
        reason = browser.find_element(By.ID, "details-reason").text
        assert "no run" not in reason and "2 current, 1 never run" in reason
        listed = browser.find_elements(By.CSS_SELECTOR, "#details-members tbody tr")
        assert [row.get_attribute("data-name") for row in listed] == members
        assert [row.text.split()[0] for row in listed] == ["[i=1]", "[i=2]", "[i=10]"]
        failed = [row for row in listed if "failed" in (row.get_attribute("class") or "")]
        assert [row.get_attribute("data-name") for row in failed] == ["fit[i=2]"]
        screenshot(browser, "serve-sweep.png")

        failed[0].click()  # a member: its own details, its failure in words
        wait_until(lambda: browser.find_element(By.ID, "details-name").text == "fit[i=2]",
                   why="the member's details")  # fmt: skip
        history = wait_until(
            lambda: browser.find_element(By.CSS_SELECTOR, "#details-history tbody").text
        )
        assert "failed (exit 3)" in history and "NonZeroExitCode" not in history
        why = browser.find_element(By.ID, "details-reason").text
        # Said once: the sync in front (the reason does not say it), the health not (it does).
        assert why.startswith("never run. failed: job ") and "failed (exit 3)" in why, why
        assert console_errors(browser) == []
        browser.get("about:blank")

"""The console at ``/`` in a real headless browser (Debian's chromium and chromedriver, through selenium).

What a person sees: the key typed once (kept in the tab's sessionStorage only),
what needs a person now, a new item within a second of the line that causes it,
a session page with its unknown turns and the decisions it would accept, and a
decision from the form refused with its code on a stale revision and accepted
on the right one. ``EVENTLOG_SCREENSHOTS=docs`` writes the two pages' screenshots
there (docs/console-status.png, docs/console-session.png).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from eventlog.appender import EventLog
from tests.conftest import ROOT, run_cli
from tests.serving import Server, make_keys, start_server

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"



@pytest.fixture(autouse=True)
def _chromium() -> None:
    """A loud skip without chromium outside CI, a failure in CI (.ci/run installs it)."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
        if os.environ.get("CI"):
            pytest.fail("chromium or chromedriver is not installed, and CI must run this test (.ci/run installs them)")
        pytest.skip("CHROMIUM IS NOT INSTALLED: the console was not tested (apt-get install chromium chromium-driver)")

#: The closed network refuses chromium's own background connections: these keep it from trying.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1200,1000", "--hide-scrollbars"]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    os.environ.setdefault("SE_OFFLINE", "true")  # selenium must not look for a driver to download
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A server on seed 004's unknown turns and incompatible checkpoints, and a watcher that stopped (seed 000)."""
    log = tmp_path / "ledger.jsonl"
    with log.open("wb") as out:
        for name in ("handoffs_watcher_stopped", "sessions_unknown_turn"):
            out.write((ROOT / "fixtures" / f"{name}.jsonl").read_bytes())
        # two sessions stopped by an incompatible checkpoint, before anyone decided
        out.writelines((ROOT / "fixtures" / "sessions_incompatible_checkpoint.jsonl").open("rb").readlines()[:4])
    s = start_server(log, tmp_path, None, "--tick", "1s")
    yield s
    s.stop()


def shot(driver: Any, name: str) -> None:
    """Save the whole page as EVENTLOG_SCREENSHOTS/NAME when that is set (the docs' screenshots)."""
    where = os.environ.get("EVENTLOG_SCREENSHOTS")
    if not where:
        return
    size = driver.get_window_size()
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(size["width"], height + 140)  # the window's frame in headless mode
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(str(Path(where) / name))
    driver.set_window_size(size["width"], size["height"])


def wait(driver: Any, timeout: float, what: Any, message: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.02).until(what, message)


def texts(driver: Any, css: str) -> list[str]:
    """The texts of the elements ``css`` selects (read again if the live page replaced them meanwhile)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    for _ in range(50):
        try:
            return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]
        except StaleElementReferenceException:
            continue
    raise AssertionError(f"{css} kept changing")


def click_link(driver: Any, text: str) -> bool:
    """Click the link ``text``; False when the live page replaced it just then (try again)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    try:
        driver.find_element(By.LINK_TEXT, text).click()
    except StaleElementReferenceException:
        return False
    return True


def type_key(driver: Any, key: str) -> None:
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, "keybox")
    assert box.is_displayed()
    driver.find_element(By.ID, "key").send_keys(key)
    driver.find_element(By.CSS_SELECTOR, "#keybox button").click()


NEW_SESSION = [
    {"type": "turn_started", "session_id": "s-new", "turn_id": "z1"},
    {"type": "turn_finished", "session_id": "s-new", "turn_id": "z1", "outcome": "outcome_unknown",
     "terminal_reason": "interrupt_checkpoint_unavailable"},
    {"type": "execution_gone", "session_id": "s-new"},
]


def test_console_shows_what_needs_a_person_live_and_sends_decisions(browser: Any, server: Server,
                                                                     tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(server.url + "/")
    type_key(browser, "rlk_wrong")
    wait(browser, 10, lambda d: d.find_element(By.ID, "keyerror").is_displayed(), "a wrong key is refused")
    assert "401" in browser.find_element(By.ID, "keyerror").text
    type_key(browser, server.keys["ops"])
    wait(browser, 10, lambda d: d.find_element(By.ID, "count").text not in ("", "–"), "the triage shows")
    assert browser.execute_script("return window.sessionStorage.getItem('eventlog.key')") == server.keys["ops"]
    assert browser.execute_script("return window.localStorage.length") == 0
    assert server.keys["ops"] not in browser.current_url

    status = server.client("viewer").get("/v1/status").json()
    urgent_first = sorted(status["groups"], key=lambda g: g["urgency"])  # the screen's order
    wait(browser, 10, lambda d: texts(d, "#needs .group h3") == [f"{g['title']}: {g['count']}" for g in urgent_first],
         "the groups show, most urgent first")
    items = [i for g in urgent_first for i in g["items"]]
    needs = texts(browser, "#needs .item .line")
    assert [line.split(" ", 1)[0].rstrip(":") for line in needs] == [i["id"] for i in items]  # the same triage
    assert texts(browser, "#needs .item .next") == [i["next"] for i in items]  # the commands to copy
    assert all(i["reason"] in line for i, line in zip(items, needs, strict=True))
    assert any(line.startswith("s-early-gone (for ") for line in needs)
    assert "watcher_late" in {g["reason_code"] for g in status["groups"]}
    assert browser.find_element(By.ID, "count").text == str(status["needs_person"])
    headline = browser.find_element(By.ID, "headline").text  # the totals; skips counted by reason, in words
    assert "skip reasons (" in headline and "[object Object]" not in headline, headline
    items = server.client("viewer").get("/v1/dump").json()["sessions"]["items"]
    waiting = [sid for sid, it in items.items() if it["admission_state"] == "recovery_required"
               or (it["attention"] == "CONTEXT_GAP" and it["admission_state"] != "closed")]
    assert len(waiting) == 3 and texts(browser, "#waiting a") == waiting
    assert browser.find_element(By.ID, "conn").text == "live"

    # a line that makes a session wait for a person: on screen within a second, without a reload
    EventLog(server.log).append(NEW_SESSION[:2])
    written = time.monotonic()
    wait(browser, 1.0, lambda d: any(t.startswith("s-new (for ") for t in texts(d, "#needs .item .line")),
         "the new item did not appear within a second of its line")
    seen = time.monotonic() - written
    assert "s-new" in texts(browser, "#waiting a")
    assert browser.execute_script("return performance.getEntriesByType('navigation').length") == 1  # no reload
    shot(browser, "console-status.png")
    print(f"new item on screen {seen * 1000:.0f} ms after its line was written")

    EventLog(server.log).append(NEW_SESSION[2:])
    wait(browser, 10, lambda d: texts(d, "#waiting a")[-1:] == ["s-new"] and click_link(d, "s-new"), "a click")
    wait(browser, 10, lambda d: d.find_element(By.ID, "sid").text == "s-new", "the session page shows")
    wait(browser, 10, lambda d: "interrupt_checkpoint_unavailable" in " ".join(texts(d, "#turns li")),
         "the unknown turn shows its terminal_reason")
    wait(browser, 10, lambda d: "abandon z1" in texts(d, "#accept button"), "abandon is offered once it is gone")
    assert "recovery_required" in browser.find_element(By.ID, "state").text
    assert texts(browser, "#accept button") == ["close", "abandon z1"]
    assert browser.find_element(By.ID, "revision").get_attribute("value") == "3"

    def send(revision: int) -> str:
        Select(browser.find_element(By.ID, "decision")).select_by_value("abandon")
        Select(browser.find_element(By.ID, "turn")).select_by_value("z1")
        field = browser.find_element(By.ID, "revision")
        field.clear()
        field.send_keys(str(revision))
        reason = browser.find_element(By.ID, "reason")
        reason.clear()
        reason.send_keys("the interrupt had no confirmed effect")
        before = browser.find_element(By.ID, "result-receipt").text
        browser.find_element(By.ID, "send").click()
        wait(browser, 10, lambda d: d.find_element(By.ID, "result").is_displayed()
             and d.find_element(By.ID, "result-receipt").text != before, "the answer shows")
        return str(browser.find_element(By.ID, "result-code").text)

    assert send(2) == "Refused: REQUEST_STALE"
    assert "revision" in browser.find_element(By.ID, "result-message").text
    shot(browser, "console-session.png")
    assert send(3) == "Accepted"
    wait(browser, 10, lambda d: "stopped" in d.find_element(By.ID, "state").text, "the new state shows live")
    decided = [line for line in Path(server.log).read_text().splitlines() if '"s-new"' in line][-2:]
    assert all('"actor":"ops"' in line and '"decision":"abandon"' in line for line in decided)
    assert '"expected_revision":2' in decided[0] and '"expected_revision":3' in decided[1]
    assert server.keys["ops"] not in server.output()


def open_with_key(driver: Any, url: str, key: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(url)
    type_key(driver, key)
    wait(driver, 10, lambda d: d.find_element(By.ID, "conn").text == "live", "the page is live")


def test_the_session_page_says_what_needs_a_person_and_its_command(browser: Any, tmp_path: Path) -> None:
    """A worker's interrupt whose outcome is unknown, of a turn the log never started: the session is
    admitted and has no unknown turn, so only the triage item says it (interrupt_unrecorded)."""
    from selenium.webdriver.common.by import By

    log = tmp_path / "ledger.jsonl"
    log.write_bytes((ROOT / "fixtures" / "sessions_unknown_turn.jsonl").read_bytes())
    EventLog(log).append([
        {"type": "interrupt_stage", "session_id": "w1", "turn_id": "t1", "control_id": "c1",
         "stage": "control_received", "elapsed_ms": 0},
        {"type": "control_result", "session_id": "w1", "turn_id": "t1", "control_id": "c1", "operation": "interrupt",
         "outcome": "unknown", "reason_code": "deadline_exceeded"}])
    server = start_server(log, tmp_path, None, "--tick", "1s")
    try:
        [item] = [i for g in server.client("viewer").get("/v1/status").json()["groups"] for i in g["items"]
                  if i["id"] == "w1"]
        assert item["reason_code"] == "interrupt_unrecorded"
        open_with_key(browser, server.url + "/", server.keys["ops"])
        wait(browser, 10, lambda d: item["next"] in texts(d, "#needs .item .next"), "the status page lists it")
        wait(browser, 10, lambda d: click_link(d, "w1"), "a click on the item's session")
        wait(browser, 10, lambda d: d.find_element(By.ID, "sid").text == "w1", "the session page shows")
        wait(browser, 10, lambda d: texts(d, "#sneeds .next") == [item["next"]], "the session page gives the command")
        [line] = texts(browser, "#sneeds .line")
        assert item["for_s"] is not None  # since its control_result
        said = re.fullmatch(r"interrupt_unrecorded \(for [^)]*\): (.*)", line)
        assert said is not None and said[1] == item["reason"]  # as status words it
        assert "deadline_exceeded" in line and "t1" in line
        assert not browser.find_element(By.ID, "noneeds").is_displayed()

        browser.get(server.url + "/sessions/s-unk")  # admitted again after start_fresh: nothing to do
        wait(browser, 10, lambda d: d.find_element(By.ID, "sid").text == "s-unk", "the session page shows")
        wait(browser, 10, lambda d: d.find_element(By.ID, "noneeds").is_displayed(), "it says nothing is needed")
        assert texts(browser, "#sneeds .item") == []
    finally:
        server.stop()


def test_the_console_puts_first_what_status_puts_first(browser: Any, tmp_path: Path) -> None:
    """R7: the text screen ranks the groups by urgency (to decide, to act on, what the runners clear themselves)
    but the console kept the JSON's order (by domain): on a bad night the decision waiting 5 h was below the
    fold. README: a console shows what ``status`` shows, so it shows the groups in the screen's order."""
    from selenium.webdriver.common.by import By

    now = datetime.now().astimezone().replace(microsecond=0)

    def ago(hours: float) -> str:
        return (now - timedelta(hours=hours)).isoformat()

    log = tmp_path / "ledger.jsonl"
    EventLog(log).append([
        {"type": "handoff_created", "ts": ago(3), "handoff_id": "h1", "account": "acct-a"},
        {"type": "claimed", "ts": ago(2), "handoff_id": "h1", "watcher": "w1", "attempt": 1},  # stale: released
        {"type": "watcher_run", "ts": ago(2), "watcher": "w1", "exit": "ok", "period_s": 600},  # late: act
        {"type": "worker_claimed", "ts": ago(5), "session_id": "s1", "generation": 1, "worker": "wk",
         "restore": True},
        {"type": "checkpoint_restore_failed", "ts": ago(5), "session_id": "s1", "generation": 1,
         "reason": "incompatible_checkpoint"},  # stopped: to decide
    ])
    screen = run_cli("status", str(log))
    titles = [line for line in screen.stdout.splitlines() if re.fullmatch(r"\S.*: \d+", line)]
    assert titles == ["Sessions stopped: checkpoint restore failed: 1", "Watchers that stopped reporting: 1",
                      "Claims gone quiet before any resume request: 1"], screen.stdout
    server = start_server(log, tmp_path, None, "--tick", "1s")
    try:
        by_domain = [g["reason_code"] for g in server.client("viewer").get("/v1/status").json()["groups"]]
        assert by_domain == ["stale_retryable", "watcher_late", "restore_failed"]  # status --json: by domain
        open_with_key(browser, server.url + "/", server.keys["ops"])
        wait(browser, 10, lambda d: len(texts(d, "#needs .group h3")) == 3, "the groups show")
        assert texts(browser, "#needs .group h3") == titles
        shown = [e.get_attribute("data-reason") for e in browser.find_elements(By.CSS_SELECTOR, "#needs .group")]
        assert shown == ["restore_failed", "watcher_late", "stale_retryable"]
    finally:
        server.stop()


def test_a_session_with_no_worker_at_work_is_listed_and_its_page_says_why(browser: Any, tmp_path: Path) -> None:
    """The review's sessions, relative to now: each admitted and "takes work" in the dump, none had a line on the
    console. Each is listed with its age and its command, and its page says why (worker_not_ready, worker_gone,
    decision_unclaimed)."""
    from selenium.webdriver.common.by import By

    from tests.test_sessions_without_worker import WITHOUT, shifted

    log = tmp_path / "ledger.jsonl"
    EventLog(log).append(shifted(datetime.now().astimezone().replace(microsecond=0)))
    server = start_server(log, tmp_path, None, "--tick", "1s")
    try:
        status = server.client("viewer").get("/v1/status", params={"all": "1"}).json()
        found = {i["id"]: i for g in status["groups"] for i in g["items"] if i["id"] in WITHOUT}
        assert {sid: i["reason_code"] for sid, i in found.items()} == {sid: c for sid, (c, _t) in WITHOUT.items()}
        open_with_key(browser, server.url + "/?all=1", server.keys["ops"])
        wait(browser, 10, lambda d: {i["next"] for i in found.values()} <= set(texts(d, "#needs .item .next")),
             "the status page lists them")
        lines = texts(browser, "#needs .item .line")
        assert any(line.startswith("s-stuck (for 5 h): admitted, but a worker") for line in lines), lines
        wait(browser, 10, lambda d: click_link(d, "s-dead"), "a click on the session")
        wait(browser, 10, lambda d: d.find_element(By.ID, "sid").text == "s-dead", "the session page shows")
        wait(browser, 10, lambda d: texts(d, "#sneeds .next") == [found["s-dead"]["next"]], "its command")
        [line] = texts(browser, "#sneeds .line")
        assert line == f"worker_gone (for 1 h 59 min): {found['s-dead']['reason']}"
    finally:
        server.stop()


def send_form(browser: Any) -> str:
    """Click Send; the answer's head (``Accepted``, ``Refused: CODE``, ``Already accepted (line N)``) once it shows."""
    from selenium.webdriver.common.by import By

    before = browser.find_element(By.ID, "result-receipt").text
    browser.find_element(By.ID, "send").click()
    wait(browser, 10, lambda d: d.find_element(By.ID, "result").is_displayed()
         and d.find_element(By.ID, "result-receipt").text != before, "the answer shows")
    return str(browser.find_element(By.ID, "result-code").text)


def test_a_second_send_is_the_first_receipt_and_never_moves_to_another_turn(browser: Any, tmp_path: Path) -> None:
    """Seed 004: a decision names the revision the person saw, and the same request with the same idempotency key
    gets its first receipt. After abandon z1 is accepted the page goes live to the next revision, but the form
    keeps what was chosen: sending it again is the same decision ("already accepted (line N)", nothing changes),
    never a second one refused as stale, and never an abandon of z2 that nobody chose."""
    from selenium.webdriver.common.by import By

    log = tmp_path / "ledger.jsonl"
    EventLog(log).append([
        {"type": "turn_started", "session_id": "s2", "turn_id": "z1"},
        {"type": "turn_started", "session_id": "s2", "turn_id": "z2"},
        {"type": "turn_finished", "session_id": "s2", "turn_id": "z1", "outcome": "outcome_unknown"},
        {"type": "turn_finished", "session_id": "s2", "turn_id": "z2", "outcome": "outcome_unknown"},
        {"type": "execution_gone", "session_id": "s2"}])
    server = start_server(log, tmp_path, None, "--tick", "1s")
    try:
        open_with_key(browser, server.url + "/sessions/s2", server.keys["ops"])
        wait(browser, 10, lambda d: "abandon z1" in texts(d, "#accept button"), "the decisions show")
        assert browser.find_element(By.ID, "revision").get_attribute("value") == "5"
        browser.find_element(By.XPATH, "//button[text()='abandon z1']").click()
        browser.find_element(By.ID, "reason").send_keys("no confirmed effect")

        assert send_form(browser) == "Accepted"
        assert '"revision": 6' in browser.find_element(By.ID, "result-receipt").text  # the receipt shows
        wait(browser, 10, lambda d: texts(d, "#turns li code") == ["z2"], "the page goes live to revision 6")
        wait(browser, 10, lambda d: "sending it again gets its first receipt" in d.find_element(By.ID, "revnow").text,
             "the form says a second send is the same decision")
        assert browser.find_element(By.ID, "revision").get_attribute("value") == "5"
        assert browser.find_element(By.ID, "turn").get_attribute("value") == "z1"
        assert send_form(browser) == "Already accepted (line 6)"
        decided = [json.loads(line) for line in log.read_text().splitlines() if "recovery_decision" in line]
        assert len(decided) == 2 and all(d["target_turn_id"] == "z1" for d in decided)
        assert decided[0]["idempotency_key"] == decided[1]["idempotency_key"]  # one key for the one form
        receipts = server.client("viewer").get("/v1/dump").json()["sessions"]["receipts"]
        assert [(r["line"], r["result"], r["replayed"]) for r in receipts] == [(6, "accepted", False),
                                                                               (7, "accepted", True)]
        assert server.client("viewer").get("/v1/sessions/s2").json()["unknown_turns"] == ["z2"]

        browser.find_element(By.XPATH, "//button[text()='abandon z2']").click()  # picking again takes the revision
        assert browser.find_element(By.ID, "revision").get_attribute("value") == "6"
        assert send_form(browser) == "Accepted"
    finally:
        server.stop()


def test_a_refusal_names_who_moved_the_session_and_a_double_click_is_one_decision(
        browser: Any, tmp_path: Path) -> None:
    """alice's form holds revision 2 of s-x; bob closes s-x with `eventlog decide` meanwhile; alice's Send is
    refused and the page says by whom, on which line, why, and the command to paste. The session page lists the
    decisions made (who, when, what, the receipt, the reason). A double click on Send is one decision."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    log = tmp_path / "ledger.jsonl"
    stopped = [({"type": "worker_claimed", "session_id": sid, "generation": 1, "worker": "w", "restore": True},
                {"type": "checkpoint_restore_failed", "session_id": sid, "generation": 1,
                 "reason": "incompatible_checkpoint"}) for sid in ("s-x", "s-y")]
    EventLog(log).append([ev for pair in stopped for ev in pair])
    keys = make_keys(tmp_path / "keys.json", {"alice": ["read", "sessions:recover"]})
    server = start_server(log, tmp_path, keys, "--tick", "1s")
    try:
        open_with_key(browser, server.url + "/sessions/s-x", keys["alice"])
        wait(browser, 10, lambda d: "retry_restore" in texts(d, "#accept button"), "the decisions show")
        assert shown(browser, "#nomade")  # no decision yet
        browser.find_element(By.XPATH, "//button[text()='retry_restore']").click()
        browser.find_element(By.ID, "reason").send_keys("the runtime is back")
        bob = run_cli("decide", str(log), "s-x", "--decision", "close", "--expected-revision", "2",
                      "--idempotency-key", "b1", "--reason", "retired for good", "--actor", "bob")
        assert bob.returncode == 0, bob.stderr  # line 5
        wait(browser, 10, lambda d: any("bob" in t for t in texts(d, "#made li")), "bob's decision shows live")
        [made] = texts(browser, "#made li")
        assert made.startswith("line 5 · ") and "bob: close (revision 2) → accepted" in made
        assert "reason: retired for good" in made

        assert send_form(browser) == "Refused: REQUEST_STALE"
        said = browser.find_element(By.ID, "result-message").text
        assert "it was decided on revision 2, and the session is at revision 3 now" in said
        assert "moved by: line 5: close by bob at " in said and "'retired for good'" in said
        assert said.endswith(f"next: eventlog sessions {log} s-x")
        wait(browser, 10, lambda d: len(texts(d, "#made li")) == 2, "alice's refusal is in the audit trail too")
        assert "alice: retry_restore (revision 2) → REQUEST_STALE" in texts(browser, "#made li")[1]

        browser.get(server.url + "/sessions/s-y")
        wait(browser, 10, lambda d: "close" in texts(d, "#accept button"), "s-y's decisions show")
        browser.find_element(By.XPATH, "//button[text()='close']").click()
        browser.find_element(By.ID, "reason").send_keys("retired")
        ActionChains(browser).double_click(browser.find_element(By.ID, "send")).perform()
        wait(browser, 10, lambda d: d.find_element(By.ID, "result").is_displayed()
             and d.find_element(By.ID, "result-code").text != "", "the answer shows")
        assert send_form(browser) == "Already accepted (line 7)"
        receipts = [r for r in server.client("alice").get("/v1/dump").json()["sessions"]["receipts"]
                    if r["session_id"] == "s-y"]
        assert receipts[0]["line"] == 7 and all(r["result"] == "accepted" for r in receipts), receipts
        assert all(r["replayed"] for r in receipts[1:])
    finally:
        server.stop()


def test_the_session_page_warns_which_bad_lines_name_the_session_and_decides_as_always(
        browser: Any, tmp_path: Path) -> None:
    """Line 2 is s1's restore failure with a generation written as a string: left out, s1 reads as admitted.
    The page says that a bad line names s1 (which, why, how to see it); the decision buttons work as always
    (no box to tick), and the answer says the decision was judged without that line."""
    from selenium.webdriver.common.by import By

    log = tmp_path / "ledger.jsonl"
    log.write_text(
        '{"type":"worker_claimed","ts":"2026-08-03T09:00:00+09:00","session_id":"s1","generation":1,"worker":"w",'
        '"restore":true}\n{"type":"checkpoint_restore_failed","ts":"2026-08-03T09:00:10+09:00","session_id":"s1",'
        '"generation":"1","reason":"incompatible_checkpoint"}\n', encoding="utf-8")
    server = start_server(log, tmp_path, None, "--tick", "1s")
    try:
        open_with_key(browser, server.url + "/sessions/s1", server.keys["ops"])
        wait(browser, 10, lambda d: d.find_element(By.ID, "badlines").is_displayed(), "the page names the bad lines")
        warning = browser.find_element(By.ID, "badlines").text
        assert "1 bad line(s) of the log name this session" in warning, warning
        assert f"line 2: wrong_type: generation: expected int, got str (see it: sed -n '2p' {log})" in warning
        assert not browser.find_elements(By.CSS_SELECTOR, "input[type=checkbox]")  # no override box
        browser.find_element(By.XPATH, "//button[text()='close']").click()
        browser.find_element(By.ID, "reason").send_keys("retired")
        browser.find_element(By.ID, "send").click()
        wait(browser, 10, lambda d: d.find_element(By.ID, "result").is_displayed(), "the answer shows")
        assert browser.find_element(By.ID, "result-code").text == "Accepted"
        assert "judged without the bad line(s) that name this session: line 2" in \
            browser.find_element(By.ID, "result-message").text
        assert '"decision":"close"' in log.read_text().splitlines()[-1]
    finally:
        server.stop()


# --- never an old all-clear; every item named; a session gone; texts escaped ----------------------------------

#: The server's --tick in these tests: a page must say it is not current after a few ticks of silence.
TICK_S = 1.0


def shown(driver: Any, css: str) -> bool:
    """Whether the element ``css`` is on screen (False when there is none, or the live page replaced it just then)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    try:
        return any(e.is_displayed() for e in driver.find_elements(By.CSS_SELECTOR, css))
    except StaleElementReferenceException:
        return False


def text(driver: Any, css: str) -> str:
    """The text of the elements ``css`` selects, joined."""
    return " ".join(texts(driver, css))


def all_clear(driver: Any) -> bool:
    """Whether the page says, in words a person reads, that nothing needs a person."""
    return shown(driver, "#calm") or text(driver, "#count") == "0"


SINCE = re.compile(r"since (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?[+-]\d\d:\d\d)")


def test_a_lost_log_or_a_silent_server_is_never_shown_as_an_all_clear(browser: Any, tmp_path: Path) -> None:
    """A calm log: "Nothing needs a person". Moved away: the page lists the missing log as status does (its
    item and command) and says since when it is not current; back: calm again. A server that stops answering
    (SIGSTOP: no tick for a few ticks) or dies: the old view is greyed, no all-clear, "not current" with why."""
    from selenium.webdriver.common.by import By

    log = tmp_path / "calm.jsonl"
    shutil.copy(ROOT / "fixtures" / "sessions_close.jsonl", log)
    assert run_cli("status", str(log)).returncode == 0  # calm now
    server = start_server(log, tmp_path, None, "--tick", f"{TICK_S:g}s")
    try:
        open_with_key(browser, server.url + "/", server.keys["ops"])
        wait(browser, 10, lambda d: shown(d, "#calm"), "the calm log shows calm")
        assert text(browser, "#calm") == "Nothing needs a person." and not shown(browser, "#stale")

        before = datetime.now().astimezone()
        log.rename(tmp_path / "calm.moved")
        said = run_cli("status", str(log))
        assert said.returncode == 1 and "The log is missing: 1" in said.stdout
        wait(browser, 10, lambda d: "The log is missing: 1" in texts(d, "#needs .group h3"),
             "the missing log is listed as status lists it")
        assert not all_clear(browser) and text(browser, "#count") == "1"
        [command] = texts(browser, "#needs .item .next")
        assert command in said.stdout and command == f"ls -la {tmp_path}"  # status's own command
        assert shown(browser, "#stale")
        banner = text(browser, "#stale")
        assert "Not current" in banner and "does not exist" in banner, banner
        since = datetime.fromisoformat(SINCE.search(banner)[1])  # type: ignore[index]
        assert before - timedelta(seconds=1) <= since <= datetime.now().astimezone(), banner

        (tmp_path / "calm.moved").rename(log)
        wait(browser, 10, lambda d: shown(d, "#calm") and not shown(d, "#stale"), "calm again once it is back")

        server.proc.send_signal(signal.SIGSTOP)  # alive, connected, silent
        try:
            wait(browser, 4 * TICK_S + 5, lambda d: shown(d, "#stale"), "a silent server makes the page not current")
            assert not all_clear(browser) and text(browser, "#count") == "?"
            banner = text(browser, "#stale")
            assert "Not current" in banner and "nothing new from the server" in banner, banner
            assert f"since {text(browser, '#asof')}" in banner  # the last judgement it had
            assert browser.find_element(By.ID, "status-page").get_attribute("data-old") == "yes"  # greyed
        finally:
            server.proc.send_signal(signal.SIGCONT)
        wait(browser, 10, lambda d: shown(d, "#calm") and not shown(d, "#stale"), "current again once it answers")

        server.stop()
        wait(browser, 10, lambda d: "unreachable" in text(d, "#stale"), "a dead server makes the page not current")
        assert not all_clear(browser) and text(browser, "#count") == "?"
        assert f"eventlog status {log}" in text(browser, "#stale")  # what a person runs instead
    finally:
        server.stop()


def test_every_item_is_named_and_the_hint_command_works_when_pasted(browser: Any, tmp_path: Path) -> None:
    """Five bad lines: the console shows 3 and "and 2 more" with a command that runs (LOG quoted: its name has a
    space) and a link that shows every item; /v1/status?all=1 gives every item, as status --all does."""
    log = tmp_path / "my log.jsonl"
    shutil.copy(ROOT / "fixtures" / "sessions_close.jsonl", log)
    with log.open("a") as f:
        f.writelines(f"not json {n}\n" for n in range(5))
    server = start_server(log, tmp_path, None, "--tick", f"{TICK_S:g}s")
    try:
        c = server.client("viewer")
        [group] = [g for g in c.get("/v1/status").json()["groups"] if g["reason_code"] == "bad_line"]
        assert group["count"] == 5 and len(group["items"]) == 3
        [group] = [g for g in c.get("/v1/status", params={"all": "1"}).json()["groups"]
                   if g["reason_code"] == "bad_line"]
        assert len(group["items"]) == 5
        wrong = c.get("/v1/status", params={"all": "maybe"})
        assert wrong.status_code == 400 and "all" in wrong.json()["message"]

        open_with_key(browser, server.url + "/", server.keys["ops"])
        wait(browser, 10, lambda d: "Bad lines (skipped, counted): 5" in texts(d, "#needs .group h3"),
             "the group shows")
        assert len(texts(browser, "#needs .item")) == 3
        more = text(browser, "#needs .more")
        assert "and 2 more" in more, more
        [command] = texts(browser, "#needs .more code")
        words = shlex.split(command)
        assert words[:3] == ["eventlog", "status", str(log)] and "--all" in words
        pasted = run_cli(*words[1:])
        assert pasted.returncode == 1, pasted.stderr  # something needs a person (not 2: bad usage)
        assert all(f"sed -n '{n}p' '{log}'" in pasted.stdout for n in range(12, 17))  # every one

        wait(browser, 10, lambda d: click_link(d, "show every item"), "the link to every item")
        wait(browser, 10, lambda d: len(texts(d, "#needs .item")) == 5, "every item shows")
        assert "all=1" in browser.current_url and not shown(browser, "#needs .more")
        assert not shown(browser, "#keybox")  # the key is still the tab's
        assert [line.split(":")[0] for line in texts(browser, "#needs .item .line")] == \
            [f"line {n}" for n in range(12, 17)]
    finally:
        server.stop()


def test_a_session_page_says_when_its_session_is_no_longer_in_the_log(browser: Any, tmp_path: Path) -> None:
    """The log replaced by one without the session: the API answers 404, and the page says the session is no
    longer in the log and hides the decisions; the log back: the session and its decisions show again."""
    from selenium.webdriver.common.by import By

    log = tmp_path / "ledger.jsonl"
    EventLog(log).append(NEW_SESSION)
    kept = tmp_path / "kept.jsonl"
    shutil.copy(log, kept)
    server = start_server(log, tmp_path, None, "--tick", f"{TICK_S:g}s")
    try:
        open_with_key(browser, server.url + "/sessions/s-new", server.keys["ops"])
        wait(browser, 10, lambda d: texts(d, "#accept button") == ["close", "abandon z1"], "the decisions show")
        assert shown(browser, "#send")

        other = tmp_path / "other.jsonl"
        shutil.copy(ROOT / "fixtures" / "sessions_close.jsonl", other)
        os.replace(other, log)
        wait(browser, 10, lambda d: shown(d, "#missing"), "the page says the session is gone")
        assert server.client("viewer").get("/v1/sessions/s-new").status_code == 404
        said = text(browser, "#missing")
        assert "no longer in the log" in said and "no session 's-new'" in said, said
        assert not shown(browser, "#accept button") and not shown(browser, "#send")
        assert "waits for a decision" not in text(browser, "#state")
        assert browser.find_element(By.ID, "conn").text == "live"  # still followed: it may come back

        shutil.copy(kept, other)
        os.replace(other, log)
        wait(browser, 10, lambda d: texts(d, "#accept button") == ["close", "abandon z1"], "it shows again")
        assert not shown(browser, "#missing") and shown(browser, "#send")
    finally:
        server.stop()


def test_texts_from_the_log_are_escaped_as_the_cli_escapes_them(browser: Any, tmp_path: Path) -> None:
    """A reason with a bidi override ("r\\u202eevil" would read "rlive") shows escaped, as status prints it; a
    session id with one links to its page and is escaped there; a 400-character id wraps on its page."""
    from selenium.webdriver.common.by import By

    log = tmp_path / "ledger.jsonl"
    long_id = "s-" + "x" * 398
    EventLog(log).append([
        {"type": "handoff_created", "handoff_id": "h1", "account": "cloud-account-a"},
        {"type": "needs_human", "handoff_id": "h1", "reason": "r\u202eevil\u2066\x1b[2J\u200f"},
        *[{**e, "session_id": sid} for sid in ("s\u202ex", long_id) for e in NEW_SESSION]])
    cli_line = next(line for line in run_cli("status", str(log)).stdout.splitlines() if "evil" in line)
    reason = cli_line.split(": ", 1)[1]
    assert reason == "handed to a person: r\\u202eevil\\u2066\\x1b[2J\\u200f (account cloud-account-a)"
    server = start_server(log, tmp_path, None, "--tick", f"{TICK_S:g}s")
    try:
        open_with_key(browser, server.url + "/", server.keys["ops"])
        wait(browser, 10, lambda d: any(t.startswith("h1 ") for t in texts(d, "#needs .item .line")), "h1 shows")
        [line] = [t for t in texts(browser, "#needs .item .line") if t.startswith("h1 ")]
        assert line.endswith(": " + reason), line
        page = browser.find_element(By.TAG_NAME, "body").text
        assert not re.search("[\u202a-\u202e\u2066-\u2069\u200e\u200f\x1b]", page)
        assert "s\\u202ex" in texts(browser, "#waiting a")

        wait(browser, 10, lambda d: click_link(d, "s\\u202ex"), "a click on the escaped id")
        wait(browser, 10, lambda d: d.find_element(By.ID, "sid").text == "s\\u202ex", "its page, the id escaped")
        wait(browser, 10, lambda d: "abandon z1" in texts(d, "#accept button"), "its decisions show")

        browser.get(server.url + "/sessions/" + long_id)
        wait(browser, 10, lambda d: d.find_element(By.ID, "sid").text == long_id, "the long id's page shows")
        width = browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], width  # wrapped, not 7000 px wide
    finally:
        server.stop()


def test_a_fifo_or_a_directory_at_the_log_s_path_is_named_and_the_page_never_gives_a_command_that_hangs(
        browser: Any, tmp_path: Path) -> None:
    """A FIFO put at LOG's path: `eventlog status LOG` would wait in open() for ever (it reads a pipe, on purpose),
    so the status page's item and banner, and a session page's banner, give `ls -la DIR`, and the item says
    what is there (not "not written yet?"). A directory there: the same, named a directory."""
    from selenium.webdriver.common.by import By

    log = tmp_path / "calm.jsonl"
    shutil.copy(ROOT / "fixtures" / "sessions_close.jsonl", log)
    kept = tmp_path / "kept.jsonl"
    shutil.copy(log, kept)
    look = f"ls -la {tmp_path}"
    server = start_server(log, tmp_path, None, "--tick", f"{TICK_S:g}s")
    try:
        open_with_key(browser, server.url + "/", server.keys["ops"])
        wait(browser, 10, lambda d: shown(d, "#calm"), "the calm log shows calm")
        session = browser.current_window_handle
        browser.switch_to.new_window("tab")
        browser.get(server.url + "/sessions/s-close")  # the key is the first tab's: type it here too
        type_key(browser, server.keys["ops"])
        wait(browser, 10, lambda d: d.find_element(By.ID, "sid").text == "s-close", "the session page shows")

        for kind, put in (("(a FIFO)", os.mkfifo), ("is a directory, not a log file", os.mkdir)):
            log.unlink() if log.is_file() or log.is_fifo() else log.rmdir()
            put(log)
            browser.switch_to.window(session)
            wait(browser, 10, lambda d, kind=kind: kind in text(d, "#needs .item .line"), f"the item names {kind}")
            [line] = texts(browser, "#needs .item .line")
            assert "not written yet" not in line and str(log) in line, line
            assert texts(browser, "#needs .item .next") == [look]
            assert shown(browser, "#stale") and kind in text(browser, "#stale")
            assert texts(browser, "#stale code") == [look]  # never `eventlog status LOG`: on a FIFO it hangs
            browser.switch_to.window(browser.window_handles[-1])
            wait(browser, 10, lambda d, kind=kind: kind in text(d, "#stale"), "the session page is not current")
            assert texts(browser, "#stale code") == [look]
        log.rmdir()
        shutil.copy(kept, log)
        wait(browser, 10, lambda d: not shown(d, "#stale"), "the session page is current again")
        browser.switch_to.window(session)
        wait(browser, 10, lambda d: shown(d, "#calm") and not shown(d, "#stale"), "calm again once a log is back")
    finally:
        server.stop()


def test_a_session_page_that_is_not_current_says_no_all_clear_and_drops_a_gone_session_s_commands(
        browser: Any, tmp_path: Path) -> None:
    """s-close needs nothing: "Nothing about this session needs a person now". A silent server (SIGSTOP) or a log
    moved away: the banner, with `eventlog status LOG`, and no all-clear. A session that needs a person whose log
    is truncated: its old item and decide command go (pasted, it fails "no session")."""
    log = tmp_path / "calm.jsonl"
    shutil.copy(ROOT / "fixtures" / "sessions_close.jsonl", log)
    EventLog(log).append(NEW_SESSION)
    server = start_server(log, tmp_path, None, "--tick", f"{TICK_S:g}s")
    calm = "Nothing about this session needs a person now."
    try:
        open_with_key(browser, server.url + "/sessions/s-close", server.keys["ops"])
        wait(browser, 10, lambda d: text(d, "#noneeds") == calm and shown(d, "#noneeds"), "the all-clear shows")

        server.proc.send_signal(signal.SIGSTOP)
        try:
            wait(browser, 4 * TICK_S + 5, lambda d: shown(d, "#stale"), "a silent server makes the page not current")
            assert not (shown(browser, "#noneeds") and text(browser, "#noneeds") == calm)
            assert texts(browser, "#stale code") == [f"eventlog status {log}"]
        finally:
            server.proc.send_signal(signal.SIGCONT)
        wait(browser, 10, lambda d: not shown(d, "#stale") and text(d, "#noneeds") == calm, "current again")

        log.rename(tmp_path / "calm.moved")
        wait(browser, 10, lambda d: shown(d, "#stale"), "a log moved away makes the page not current")
        assert not (shown(browser, "#noneeds") and text(browser, "#noneeds") == calm)
        assert texts(browser, "#stale code") == [f"eventlog status {log}"]
        (tmp_path / "calm.moved").rename(log)
        wait(browser, 10, lambda d: not shown(d, "#stale") and text(d, "#noneeds") == calm, "current again")

        browser.get(server.url + "/sessions/s-new")
        wait(browser, 10, lambda d: any("eventlog decide" in c for c in texts(d, "#sneeds .next")), "its item shows")
        size = len((ROOT / "fixtures" / "sessions_close.jsonl").read_bytes())
        os.truncate(log, size)  # s-new's lines are gone
        wait(browser, 10, lambda d: shown(d, "#missing"), "the page says the session is gone")
        assert texts(browser, "#sneeds .next") == [] and not shown(browser, "#noneeds")
    finally:
        server.stop()


def test_a_session_page_opened_before_its_session_is_in_the_log_shows_it_when_it_comes(
        browser: Any, tmp_path: Path) -> None:
    """/sessions/s-late before any line names s-late: "not in the log"; its lines appended: the page shows the
    session and its decisions, without a reload (it used to stop at the 404 and say "not in the log" for ever)."""
    log = tmp_path / "ledger.jsonl"
    shutil.copy(ROOT / "fixtures" / "sessions_close.jsonl", log)
    server = start_server(log, tmp_path, None, "--tick", f"{TICK_S:g}s")
    try:
        browser.get(server.url + "/sessions/s-late")
        type_key(browser, server.keys["ops"])
        wait(browser, 10, lambda d: shown(d, "#missing") and text(d, "#state") == "not in the log", "not in the log")
        EventLog(log).append([{**e, "session_id": "s-late"} for e in NEW_SESSION])
        assert server.client("viewer").get("/v1/sessions/s-late").status_code == 200
        wait(browser, 10, lambda d: texts(d, "#accept button") == ["close", "abandon z1"], "the session shows")
        assert not shown(browser, "#missing") and "recovery_required" in text(browser, "#state")
    finally:
        server.stop()

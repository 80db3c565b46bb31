"""The console links, opens and decides sessions named with a slash, a dot or nothing (docs/DECISIONS.md, "Ids in
URLs"), in chromium against a real server: a link to ``/sessions/.`` was folded to ``/sessions/`` (no page), one to
``/sessions/s%2Fwith%2Fslash`` was "no such route"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests import test_console
from tests.conftest import write_log
from tests.serving import start_server
from tests.test_console import open_with_key, texts, wait
from tests.test_odd_ids import decided, stopped

#: test_console's fixtures: ``browser``, and ``_chromium`` (autouse: a loud skip without chromium outside CI).
browser = test_console.browser
_chromium = test_console._chromium


def test_the_console_links_and_decides_sessions_named_with_a_slash_a_dot_or_nothing(browser: Any,
                                                                                     tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    odd = ["s/with/slash", ".", "..", "", "q?x#y"]
    log = write_log(tmp_path / "work.jsonl", [e for sid in odd for e in stopped(sid)])
    server = start_server(log, tmp_path, None, "--tick", "1s")
    try:
        open_with_key(browser, server.url + "/", server.keys["ops"])
        wait(browser, 10, lambda d: len(texts(d, "#waiting a")) == len(odd), "the sessions waiting show")
        links = {a.text: a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "#waiting a")}
        assert set(links) == set(odd)
        for sid in odd:
            browser.get(links[sid])
            wait(browser, 10, lambda d, sid=sid: d.find_element(By.ID, "sid").text == sid
                 and texts(d, "#accept button"), f"the page of session {sid!r} shows with its decisions")
            assert browser.find_element(By.ID, "missing").is_displayed() is False
            wait(browser, 10, lambda d, sid=sid: "outcome_unknown" in " ".join(texts(d, "#turns li")),
                 f"the turn of {sid!r} shows its outcome")
        # the last page open is q?x#y's; "." is decided from its page's form
        browser.get(links["."])
        wait(browser, 10, lambda d: "start_fresh" in texts(d, "#accept button"), "the decisions show")
        browser.find_element(By.XPATH, "//button[text()='start_fresh']").click()
        browser.find_element(By.ID, "reason").send_keys("checked the runtime")
        browser.find_element(By.ID, "send").click()
        wait(browser, 10, lambda d: d.find_element(By.ID, "result").is_displayed(), "the answer shows")
        assert browser.find_element(By.ID, "result-code").text == "Accepted"
        assert [d["session_id"] for d in decided(log)] == ["."]
    finally:
        server.stop()

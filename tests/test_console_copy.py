"""The console's commands are copied as they are, two spaces in a row included (review F11): a ``code`` of a
command had no ``white-space`` rule, so the browser collapsed the spaces of LOG ``two  sp.jsonl`` and id
``job  two`` in what is selected and copied (the element's text was right); pasted, the command exited 2.

In chromium, each command element (status' items, "and N more", the session's needs and the bad line that names
it, the not-current banner) is selected as a person selects it: the selection's text is the command, and it runs
pasted.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests import test_console
from tests.conftest import run_cli, write_log
from tests.serving import start_server
from tests.test_console import TICK_S, open_with_key, shown, wait
from tests.test_odd_ids import stopped

#: test_console's fixtures: ``browser``, and ``_chromium`` (autouse: a loud skip without chromium outside CI).
browser = test_console.browser
_chromium = test_console._chromium

LOG = "two  sp.jsonl"
SID = "job  two"

#: Select the element's contents as a drag or a triple click does; what a copy takes: the selection's text.
SELECT = """const e = arguments[0]; const r = document.createRange(); r.selectNodeContents(e);
const s = window.getSelection(); s.removeAllRanges(); s.addRange(r); return [e.textContent, s.toString()];"""


def copied(driver: Any, css: str, which: Callable[[str], bool] = lambda _: True) -> tuple[str, str]:
    """(the DOM text, the selected text) of the first element ``css`` selects whose DOM text ``which`` takes."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    for _ in range(50):
        try:
            for e in driver.find_elements(By.CSS_SELECTOR, css):
                dom, selected = driver.execute_script(SELECT, e)
                if which(dom):
                    return str(dom), str(selected)
        except StaleElementReferenceException:  # the live page replaced it just then
            continue
    raise AssertionError(f"no {css} shows what was asked")


def test_a_command_with_two_spaces_in_a_row_is_copied_whole_from_every_place_the_console_shows_one(
        browser: Any, tmp_path: Path) -> None:
    log = write_log(tmp_path / LOG, [e for sid in (SID, "s2", "s3", "s4", "s5") for e in stopped(sid)])
    with log.open("a") as f:  # line 21, a bad line that names the session: its page says which, and how to see it
        f.write(json.dumps({**stopped(SID)[0], "generation": "x"}) + "\n")
    server = start_server(log, tmp_path, None, "--tick", f"{TICK_S:g}s")
    try:
        [item] = [i for g in server.client("viewer").get("/v1/status").json()["groups"] for i in g["items"]
                  if i["id"] == SID]
        assert f"{LOG}' '{SID}'" in item["next"]  # both quoted, as status prints them

        open_with_key(browser, server.url + "/", server.keys["ops"])
        wait(browser, 10, lambda d: shown(d, "#needs .more"), "five sessions: three items and the rest")
        dom, selected = copied(browser, "#needs .item code.next", lambda t: SID in t)
        assert dom == item["next"] and selected == item["next"], selected
        dom, selected = copied(browser, "#needs .more code")
        assert LOG in dom and selected == dom, selected
        every = run_cli(*shlex.split(selected)[1:])  # as pasted
        assert every.returncode == 1, every.stderr  # they need a person (2: a LOG with one space, no such log)
        assert all(f"  s{n}" in every.stdout for n in range(2, 6)), every.stdout  # every item

        browser.get(server.url + "/sessions/job%20%20two")
        wait(browser, 10, lambda d: shown(d, "#sneeds .next"), "the session page gives its command")
        dom, selected = copied(browser, "#sneeds code.next")
        assert dom == item["next"] and selected == item["next"], selected
        refused = run_cli(*shlex.split(selected)[1:])  # pasted as it is: the placeholder, not the id, is refused
        assert refused.returncode == 2 and "<why>" in refused.stderr, refused.stderr

        dom, selected = copied(browser, "#badlines code")
        assert dom == f"sed -n '21p' '{log}'" and selected == dom, selected
        seen = subprocess.run(shlex.split(selected), capture_output=True, text=True, check=True)
        assert json.loads(seen.stdout)["generation"] == "x"

        log.rename(tmp_path / "moved.jsonl")
        wait(browser, 10, lambda d: shown(d, "#stale code"), "a log moved away makes the page not current")
        dom, selected = copied(browser, "#stale code")
        assert dom == f"eventlog status '{log}'" and selected == dom, selected
    finally:
        server.stop()

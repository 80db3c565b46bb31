"""The console's key box in chromium against a real server: a key that holds a character no key has (full-width
IME input, a zero-width space pasted along) is "not a valid key" and the key box is shown again. Found by a
review: the browser's fetch throws before sending such a header, and the page said "the server is unreachable;
retrying" for ever. While the key box is shown (no key yet, or one refused), the header says so, never
"connecting…"."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests import test_console
from tests.conftest import ROOT
from tests.serving import start_server
from tests.test_console import type_key, wait

#: test_console's fixtures: ``browser``, and ``_chromium`` (autouse: a loud skip without chromium outside CI).
browser = test_console.browser
_chromium = test_console._chromium


def shown(driver: Any, element_id: str) -> bool:
    from selenium.webdriver.common.by import By

    return bool(driver.find_element(By.ID, element_id).is_displayed())


def text(driver: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.ID, element_id).text)


def test_a_key_no_key_can_be_is_said_so_and_the_key_box_shown_again(browser: Any, tmp_path: Path) -> None:
    log = Path(shutil.copy(ROOT / "fixtures" / "sessions_unknown_turn.jsonl", tmp_path / "log.jsonl"))
    server = start_server(log, tmp_path, None, "--tick", "1s", "--port", "14604")
    try:
        browser.get(server.url + "/")
        wait(browser, 10, lambda d: shown(d, "keybox"), "the key box shows")
        assert text(browser, "conn") == "no key"
        key = server.keys["ops"]
        full_width = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in key)  # IME's full width
        zero_width = key[:8] + "\u200b" + key[8:]                           # pasted along with the key
        for typed, said in [(full_width, "character 1 is U+FF52"), (zero_width, "character 9 is U+200B")]:
            type_key(browser, typed)
            wait(browser, 10, lambda d, said=said: shown(d, "keyerror") and said in text(d, "keyerror"),
                 "a key no key can be is refused")
            assert text(browser, "keyerror").startswith("this is not a valid key: ")
            assert shown(browser, "keybox") and not shown(browser, "stale"), text(browser, "stale")
            assert text(browser, "conn") == "key refused"
            assert browser.execute_script("return window.sessionStorage.getItem('eventlog.key')") is None

        # a tab that kept such a key from before: asked again, not "unreachable"
        browser.execute_script("window.sessionStorage.setItem('eventlog.key', arguments[0])", full_width)
        browser.refresh()
        wait(browser, 10, lambda d: shown(d, "keyerror"), "a kept key no key can be is refused")
        assert "not a valid key" in text(browser, "keyerror") and not shown(browser, "stale")

        type_key(browser, "rlk_wrong")                                      # a key the server refuses: 401
        wait(browser, 10, lambda d: "(401)" in text(d, "keyerror"), "a wrong key is refused")
        assert text(browser, "conn") == "key refused"

        type_key(browser, key)
        wait(browser, 10, lambda d: text(d, "conn") == "live", "the right key")
        assert not shown(browser, "keybox")
    finally:
        server.stop()

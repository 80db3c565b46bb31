"""A hand-edited key file is checked entry by entry when it is loaded, by the rule ``keys add`` follows
(docs/DECISIONS.md, "Keys"): a name of 1 to 64 of ``A-Z a-z 0-9 . _ @ -`` (the first a letter or digit),
unique; one or more known scopes; a ``sha256`` of 64 lowercase hex digits, unique. One bad entry makes the
file unusable, as a file that is no JSON: ``keys list`` and ``serve`` exit 2 naming the file, each bad entry
and why; a running server answers 503 saying so (and says it on stderr) until the file is fixed. A key named
"" was let in and its decisions refused with "--actor must not be empty"; a name with a newline or a
sha256 of "zz" loaded without a word and ``keys list`` showed them as valid.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, run_cli
from tests.serving import make_keys, start_server

LOG = ROOT / "fixtures" / "sessions_unknown_turn.jsonl"
GOOD = {"name": "alice", "scopes": ["read", "sessions:recover"], "sha256": hashlib.sha256(b"rlk_alice").hexdigest()}
BAD: list[tuple[dict[str, Any], str]] = [
    ({"name": "", "scopes": ["read", "sessions:recover"], "sha256": hashlib.sha256(b"rlk_empty").hexdigest()},
     "entry 2 (name ''): a name is 1 to 64 of A-Z a-z 0-9 . _ @ -"),
    ({"name": "bob\nmallory", "scopes": ["read"], "sha256": hashlib.sha256(b"rlk_bob").hexdigest()},
     "entry 3 (name 'bob\\nmallory'): a name is 1 to 64"),
    ({"name": "carol", "scopes": ["read"], "sha256": "zz"},
     "entry 4 (name 'carol'): sha256 is not 64 lowercase hex digits"),
    ({"name": "dave", "scopes": [], "sha256": hashlib.sha256(b"rlk_dave").hexdigest()},
     "entry 5 (name 'dave'): scope(s) (none): give one or more of read, events:append, sessions:recover"),
    ({"name": "alice", "scopes": ["read"], "sha256": hashlib.sha256(b"rlk_alice2").hexdigest()},
     "entry 6 (name 'alice'): the file already has a key named 'alice'"),
    ({"name": "erin", "scopes": ["read"], "sha256": GOOD["sha256"]},
     "entry 7 (name 'erin'): the file already has this key (the same sha256)"),
]


def write_keys(path: Path, entries: list[dict[str, Any]]) -> Path:
    """A key file as a person edits it by hand (mode 0600)."""
    path.write_text(json.dumps({"keys": entries}, indent=2))
    os.chmod(path, 0o600)
    return path


def test_keys_list_and_serve_name_every_bad_entry_of_a_hand_edited_file(tmp_path: Path) -> None:
    path = write_keys(tmp_path / "keys.json", [GOOD, *(entry for entry, _ in BAD)])
    listed = run_cli("keys", "list", str(path))
    assert listed.returncode == 2 and listed.stdout == "", listed.stdout
    for _, said in BAD:
        assert said in listed.stderr, listed.stderr
    assert str(path) in listed.stderr and "entry 1 " not in listed.stderr
    assert len(listed.stderr.splitlines()) == 1          # one line: the name's newline is shown escaped

    served = run_cli("serve", str(LOG), "--keys", str(path), "--port", "0", timeout=30)
    assert served.returncode == 2 and served.stderr == listed.stderr, served.stderr

    added = run_cli("keys", "add", str(path), "frank", "--scope", "read")
    assert added.returncode == 2 and added.stdout == "" and "entry 2 (name '')" in added.stderr


def test_keys_add_and_loading_follow_one_rule(tmp_path: Path) -> None:
    rule = "a name is 1 to 64 of A-Z a-z 0-9 . _ @ -, the first a letter or digit"
    for n, name in enumerate(["", ".dot", "x" * 65, "a b", "a\nb"]):
        path = tmp_path / f"keys-{n}.json"
        added = run_cli("keys", "add", str(path), name, "--scope", "read")
        assert added.returncode == 2 and rule in added.stderr, added.stderr
        write_keys(path, [GOOD, {"name": name, "scopes": ["read"], "sha256": hashlib.sha256(b"k").hexdigest()}])
        listed = run_cli("keys", "list", str(path))
        assert listed.returncode == 2 and f"entry 2 (name {name!r}): {rule}" in listed.stderr, listed.stderr
    path = tmp_path / "keys.json"
    make_keys(path, {"x" * 64: ["read"]})
    assert run_cli("keys", "list", str(path)).returncode == 0


def test_a_bad_entry_can_be_taken_out_by_its_name(tmp_path: Path) -> None:
    path = write_keys(tmp_path / "keys.json", [GOOD, BAD[0][0]])
    removed = run_cli("keys", "remove", str(path), "")
    assert removed.returncode == 0, removed.stderr
    listed = run_cli("keys", "list", str(path))
    assert (listed.returncode, listed.stdout) == (0, "alice  read, sessions:recover\n")


def test_a_running_server_refuses_every_key_while_its_file_has_a_bad_entry(tmp_path: Path) -> None:
    path = write_keys(tmp_path / "keys.json", [GOOD])
    log = Path(shutil.copy(LOG, tmp_path / "work.jsonl"))
    server = start_server(log, tmp_path, {"alice": "rlk_alice", "empty": "rlk_empty"})
    try:
        alice, empty = server.client("alice"), server.client("empty")
        assert alice.get("/v1/status").status_code == 200
        write_keys(path, [GOOD, BAD[0][0]])              # a key named "" added by hand
        for c in (alice, empty):
            answer = c.post("/v1/sessions/s-unk/recovery-decisions", headers={"Idempotency-Key": "k1"},
                            json={"decision": "close", "expected_revision": 1, "reason": "x"})
            assert answer.status_code == 503, answer.text
            assert answer.json()["code"] == "KEY_FILE_UNUSABLE" and BAD[0][1] in answer.json()["message"]
        assert BAD[0][1] in server.stderr.read_text()
        assert log.read_bytes() == LOG.read_bytes()      # nothing was written

        assert run_cli("keys", "remove", str(path), "").returncode == 0
        assert alice.get("/v1/status").status_code == 200
        assert empty.get("/v1/status").status_code == 401
    finally:
        server.stop()

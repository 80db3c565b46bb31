"""The key file of a running ``eventlog serve``, as it changes under it (docs/DECISIONS.md, "Keys"): read again
whenever it changed or could not be read last time, edited through a symlink where the link points, and never
used while a user other than its owner can write it. Each against a real server on 127.0.0.1 (httpx).

Found by a review: a key file moved away and back unchanged kept every request at 503 until a ``touch`` (the
stamp of the last read was kept while the file was gone); ``keys remove`` through a symlink replaced the link
with a new file and the key it "removed" still got 200; a key file of mode 0666 was used, so any user of the host
could put in a hash of their own under alice's name and act as alice; a key-file problem was ``LOG_UNAVAILABLE``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import httpx

from tests.conftest import ROOT, run_cli
from tests.serving import make_keys, start_server

LOG = ROOT / "fixtures" / "sessions_unknown_turn.jsonl"
EVENTLOG_BIN = ROOT / ".venv" / "bin"


def get(url: str, key: str) -> httpx.Response:
    return httpx.get(url + "/v1/status", headers={"Authorization": f"Bearer {key}"}, timeout=30)


def names(path: Path) -> list[str]:
    return [k["name"] for k in json.loads(path.read_text())["keys"]]


def test_a_key_file_moved_away_and_back_unchanged_is_read_again_and_each_change_is_journaled(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys.json", {"alice": ["read"]})
    server = start_server(Path(shutil.copy(LOG, tmp_path / "log.jsonl")), tmp_path, keys, "--port", "14600")
    try:
        assert get(server.url, keys["alice"]).status_code == 200
        (tmp_path / "keys.json").rename(tmp_path / "keys.moved")
        gone = get(server.url, keys["alice"])
        assert gone.status_code == 503, gone.text
        assert gone.json() == {"code": "KEY_FILE_UNUSABLE",
                               "message": f"cannot read key file {tmp_path / 'keys.json'}: No such file or directory"}
        assert gone.json()["message"] in server.stderr.read_text()          # the journal says it, once
        assert server.stderr.read_text().count(gone.json()["message"]) == 1
        assert get(server.url, keys["alice"]).status_code == 503

        (tmp_path / "keys.moved").rename(tmp_path / "keys.json")            # the same file, unchanged
        back = get(server.url, keys["alice"])
        assert back.status_code == 200, back.text
        assert f"key file {tmp_path / 'keys.json'} can be used again (1 key(s))" in server.stderr.read_text()
        assert get(server.url, "rlk_not-a-key").status_code == 401
    finally:
        server.stop()


def test_keys_remove_and_add_through_a_symlink_change_the_file_it_names(tmp_path: Path) -> None:
    real = tmp_path / "keys.json"                                           # what the server reads
    keys = make_keys(real, {"alice": ["read"], "bob": ["read"]})
    (tmp_path / "etc").mkdir()
    link = tmp_path / "etc" / "keys.json"
    link.symlink_to(real)
    server = start_server(Path(shutil.copy(LOG, tmp_path / "log.jsonl")), tmp_path, keys, "--port", "14601")
    try:
        assert get(server.url, keys["bob"]).status_code == 200
        removed = run_cli("keys", "remove", str(link), "bob")
        assert removed.returncode == 0, removed.stderr
        assert f"from {link} (a link to {real})" in removed.stderr
        assert link.is_symlink() and names(real) == ["alice"]
        assert get(server.url, keys["bob"]).status_code == 401              # README: refused at once
        assert get(server.url, keys["alice"]).status_code == 200

        carol = make_keys(link, {"carol": ["read"]})["carol"]
        assert link.is_symlink() and names(real) == ["alice", "carol"]
        assert stat.S_IMODE(real.stat().st_mode) == 0o600
        assert get(server.url, carol).status_code == 200
    finally:
        server.stop()

    # a second hard link would keep the old keys for whoever reads it: refused, nothing written
    os.link(real, tmp_path / "other.json")
    before = real.read_bytes()
    for args in (["remove", str(real), "alice"], ["add", str(real), "dave", "--scope", "read"]):
        done = run_cli("keys", *args)
        assert done.returncode == 2 and done.stdout == "", done.stderr
        assert f"key file {real} has 2 hard links" in done.stderr and "find / -xdev -samefile" in done.stderr
    assert real.read_bytes() == before


def test_a_key_file_its_group_or_other_users_can_write_is_refused_at_start(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    make_keys(path, {"alice": ["read"]})
    before = path.read_bytes()
    for mode, who in [(0o666, "every user of this host"), (0o620, "every member of the group"),
                      (0o602, "every user outside the group")]:
        os.chmod(path, mode)
        done = run_cli("serve", str(LOG), "--keys", str(path), "--port", "14602", timeout=30)
        assert done.returncode == 2 and done.stdout == "", done.stderr
        said = done.stderr
        assert f"key file {path} has mode {mode:04o}: {who}" in said and "can write it" in said, said
        assert f"`chmod 600 {path}`" in said and "act as that name" in said
        assert "may read" not in said and "serving" not in said, said       # it never listened

        listed = run_cli("keys", "list", str(path))                         # shown, with the warning
        assert listed.returncode == 0 and listed.stdout == "alice  read\n"
        assert f"has mode {mode:04o}: {who}" in listed.stderr and "can write it" in listed.stderr
        for args in (["add", str(path), "bob", "--scope", "read"], ["remove", str(path), "alice"]):
            edited = run_cli("keys", *args)                                 # nor edited as if nothing happened
            assert edited.returncode == 2 and "can write it" in edited.stderr, edited.stderr
            assert "eventlog keys list" in edited.stderr                    # check its keys: anyone could have
        assert path.read_bytes() == before

    for mode, said in [(0o640, "every member of the group"), (0o604, "every user outside the group"),
                       (0o644, "every user of this host"), (0o700, None), (0o600, None)]:
        os.chmod(path, mode)
        listed = run_cli("keys", "list", str(path))
        assert listed.returncode == 0 and listed.stdout == "alice  read\n"
        if said is None:
            assert listed.stderr == "", (mode, listed.stderr)
        else:                                                               # the real risk: names and hashes
            assert f"has mode {mode:04o}: {said}" in listed.stderr
            assert "can read it: the names and scopes of the keys, and their hashes" in listed.stderr
            assert "write" not in listed.stderr

    os.chmod(path, 0o600)
    os.chmod(tmp_path, 0o777)                                               # anyone may put another file there
    try:
        done = run_cli("serve", str(LOG), "--keys", str(path), "--port", "14602", timeout=30)
        assert done.returncode == 2 and f"the directory {tmp_path} of key file {path} has mode 0777" in done.stderr
        assert f"`chmod go-w {tmp_path}`" in done.stderr
        assert run_cli("keys", "remove", str(path), "alice").returncode == 2
        os.chmod(tmp_path, 0o1777)                                          # /tmp's sticky bit: they may not
        assert run_cli("keys", "list", str(path)).stderr == ""
    finally:
        os.chmod(tmp_path, 0o700)


def test_a_running_server_refuses_every_key_while_other_users_can_write_its_key_file(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    keys = make_keys(path, {"alice": ["read"]})
    server = start_server(Path(shutil.copy(LOG, tmp_path / "log.jsonl")), tmp_path, keys, "--port", "14603")
    try:
        assert get(server.url, keys["alice"]).status_code == 200
        os.chmod(path, 0o666)
        # anyone may now put in a key of their own under alice's name (same size, same mtime: only the ctime moves)
        stamp = path.stat()
        forged = path.read_text().replace(hashlib.sha256(keys["alice"].encode()).hexdigest(),
                                          hashlib.sha256(b"rlk_forged").hexdigest())
        path.write_text(forged)
        os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        for key in ("rlk_forged", keys["alice"]):
            refused = get(server.url, key)
            assert refused.status_code == 503, refused.text
            assert refused.json()["code"] == "KEY_FILE_UNUSABLE"
            assert "has mode 0666: every user of this host can write it" in refused.json()["message"]
            assert f"`chmod 600 {path}`" in refused.json()["message"]
        assert server.stderr.read_text().count("has mode 0666") == 1        # journaled once

        os.chmod(path, 0o644)                                               # readable by all: used, and said
        assert get(server.url, "rlk_forged").status_code == 200
        assert "has mode 0644: every user of this host can read it" in server.stderr.read_text()
    finally:
        server.stop()


def test_the_command_a_bad_entry_names_removes_it_when_pasted(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    good = {"name": "alice", "scopes": ["read"], "sha256": hashlib.sha256(b"rlk_alice").hexdigest()}
    bad = {"name": "-x", "scopes": ["read"], "sha256": hashlib.sha256(b"rlk_x").hexdigest()}
    path.write_text(json.dumps({"keys": [good, bad]}))
    os.chmod(path, 0o600)
    listed = run_cli("keys", "list", str(path))
    assert listed.returncode == 2 and "entry 2 (name '-x')" in listed.stderr
    command = listed.stderr.rsplit("take out every key of that name: ", 1)[1].rstrip(")\n")
    assert command == f"eventlog keys remove -- {path} -x"
    env = {**os.environ, "PATH": f"{EVENTLOG_BIN}:{os.environ['PATH']}"}
    pasted = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert pasted.returncode == 0, pasted.stderr
    assert run_cli("keys", "list", str(path)).stdout == "alice  read\n"

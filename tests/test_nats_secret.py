"""A NATS password never leaves the process (docs/JETSTREAM.md, "The LOG URL"): against a real nats-server that
asks for a user and password, no output of any command (stdout, stderr, JSON, HTTP bodies, metrics labels, dumps,
snapshots, error messages) holds it; every output names the LOG as ``nats://USER@HOST:PORT/STREAM``, and a command
printed so works pasted where ``NATS_PASSWORD`` holds the password."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eventlog.jetstream import parse_url
from eventlog.logs import credentials, printed, taken
from tests import natsserver
from tests.conftest import ROOT, run_cli
from tests.serving import start_server
from tests.test_nats_liveness import following, one_line, read_json, wait_for
from tests.test_serve import read_events

USER = "op"
PASSWORD = "s3cret-F9-never-shown"
HANDOFFS = ROOT / "fixtures" / "handoffs_killed_after_claim.jsonl"
SESSIONS = ROOT / "fixtures" / "sessions_unknown_turn.jsonl"
NOTE = "The commands name the log without its password: run them where NATS_PASSWORD holds it."


@pytest.fixture(scope="module")
def nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[natsserver.Servers]:
    servers = natsserver.start(tmp_path_factory.mktemp("nats"), user=USER, password=PASSWORD)
    yield servers
    servers.stop()


def with_password(servers: natsserver.Servers, stream: str, prefix: str) -> tuple[str, str]:
    """The stream's URL with the password in it, and as every output must print it."""
    host = servers.urls[0].removeprefix("nats://")
    return (f"nats://{USER}:{PASSWORD}@{host}/{stream}?prefix={prefix}",
            f"nats://{USER}@{host}/{stream}?prefix={prefix}")


def unsaid(*outputs: str | bytes) -> None:
    """None of ``outputs`` holds the password."""
    for out in outputs:
        text = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
        assert PASSWORD not in text, text


def cli(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``eventlog ARGS`` with no password in its environment (unless ``env`` gives one); its outputs hold none."""
    out = run_cli(*args, stdin=stdin, env={"NATS_PASSWORD": "", **(env or {})})
    unsaid(out.stdout, out.stderr)
    return out


@pytest.fixture(scope="module")
def handoffs(nats: natsserver.Servers) -> tuple[str, str]:
    """A stream with two stale claims and a late watcher (status prints commands naming the log)."""
    given, shown = with_password(nats, "HANDOFFS", "ho")
    out = cli("import-log", str(HANDOFFS), given)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["log"] == shown
    return given, shown


def test_status_explain_and_the_other_commands_never_print_the_password(handoffs: tuple[str, str],
                                                                       nats: natsserver.Servers) -> None:
    given, shown = handoffs
    screen = cli("status", given)
    assert screen.returncode == 1, screen.stderr
    assert f"eventlog handoff release {shlex.quote(shown)} h1 --reason" in screen.stdout
    assert screen.stdout.splitlines()[:2] == [screen.stdout.splitlines()[0], NOTE]
    status = cli("status", given, "--json")
    assert json.loads(status.stdout)["log"] == shown
    explained = cli("explain", given, "h1")
    assert explained.returncode == 0 and f"{shown}:5: " in explained.stdout and NOTE in explained.stdout
    assert json.loads(cli("explain", given, "watcher-b", "--json").stdout)["log"] == shown
    assert json.loads(cli("replay", given).stdout)["log"] == shown
    for args in (["stalls", given], ["catchup", given, "--dry-run"], ["export", given], ["sessions", given]):
        assert cli(*args).returncode in (0, 1), args
    sessions_given, sessions_shown = with_password(nats, "SESSIONS", "se")
    assert cli("import-log", str(SESSIONS), sessions_given).returncode == 0
    listed = cli("sessions", sessions_given)
    assert listed.stdout.startswith(f"{sessions_shown}: ") and NOTE in listed.stdout
    decide = f"eventlog decide {shlex.quote(sessions_shown)} s-early-gone"
    assert decide in cli("explain", sessions_given, "s-early-gone").stdout
    appended = cli("append", given, stdin=json.dumps({"type": "handoff_created", "handoff_id": "h9",
                                                      "account": "cloud-account-a"}) + "\n")
    assert appended.returncode == 0 and json.loads(appended.stdout)["log"] == shown, appended.stderr
    retired = cli("failback", given, "--retire", "watcher-b", "--reason", "moved")
    assert retired.returncode == 0, retired.stderr


def test_a_printed_command_works_pasted_where_the_variable_is_set(nats: natsserver.Servers) -> None:
    given, shown = with_password(nats, "PASTED", "pa")
    assert cli("import-log", str(HANDOFFS), given).returncode == 0
    items = [it for g in json.loads(cli("status", given, "--json").stdout)["groups"] for it in g["items"]]
    release = next(it["next"] for it in items if it["id"] == "h1")
    assert release.startswith(f"eventlog handoff release {shlex.quote(shown)} h1 ")
    shell = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    without = subprocess.run(["sh", "-c", release], capture_output=True, text=True, cwd=ROOT, timeout=60,
                             env={**shell, "NATS_PASSWORD": ""}, check=False)
    assert without.returncode != 0 and "set NATS_PASSWORD" in without.stderr, without.stderr
    pasted = subprocess.run(["sh", "-c", release], capture_output=True, text=True, cwd=ROOT, timeout=60,
                            env={**shell, "NATS_PASSWORD": PASSWORD}, check=False)
    assert pasted.returncode == 0, pasted.stderr
    unsaid(pasted.stdout, pasted.stderr)
    after = json.loads(cli("explain", shown, "h1", "--json", env={"NATS_PASSWORD": PASSWORD}).stdout)
    assert [v["code"] for v in after["verdicts"] if v["kind"] == "handoff"] == ["pending"]


def test_serve_answers_and_says_nothing_of_the_password(handoffs: tuple[str, str], tmp_path: Path) -> None:
    given, shown = handoffs
    s = start_server(given, tmp_path)
    try:
        viewer = s.client("viewer")
        status = viewer.get("/v1/status")
        assert status.status_code == 200 and status.json()["log"] == shown
        assert any(it["next"].startswith(f"eventlog handoff release {shlex.quote(shown)} h1 ")
                   for g in status.json()["groups"] for it in g["items"])
        metrics = viewer.get("/metrics")
        assert metrics.status_code == 200 and f'log="{shown}"' in metrics.text
        dump = viewer.get("/v1/dump")
        assert dump.json()["log"] == shown
        with viewer.stream("GET", "/v1/status", headers={"Accept": "text/event-stream"}, timeout=20) as events:
            tick, view = read_events(events, 2)
        commands = json.loads(tick["data"])["commands"]
        assert commands["status"] == f"eventlog status {shlex.quote(shown)}" and commands["note"] == NOTE
        unsaid(status.text, metrics.text, dump.text, tick["data"], view["data"], viewer.get("/healthz").text)
    finally:
        assert s.stop() == 0
    unsaid(s.output())
    assert f"serving {shown} on http://" in s.output() and NOTE in s.output()


def test_follow_writes_no_password_in_its_dump_metrics_or_snapshot(handoffs: tuple[str, str], tmp_path: Path) -> None:
    given, shown = handoffs
    snap = tmp_path / "follow.snap"
    with following(given, tmp_path, "--snapshot", str(snap)) as (proc, dump, prom):
        wait_for(lambda: prom.exists() and snap.exists())
        assert read_json(dump)["log"] == shown
        labels = prom.read_text()
        assert f'log="{shown}"' in labels
        unsaid(dump.read_bytes(), labels, snap.read_bytes())
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    unsaid(out, err)


def test_an_unreachable_or_refusing_server_is_said_without_the_password(nats: natsserver.Servers) -> None:
    port = natsserver.free_ports(1)[0]
    gone = f"nats://{USER}:{PASSWORD}@127.0.0.1:{port}/GONE?timeout=1"
    out = cli("status", gone)
    assert out.returncode == 2
    assert one_line(out.stderr).startswith(f"eventlog: cannot read nats://{USER}@127.0.0.1:{port}/GONE?timeout=1: "
                                           f"cannot connect to nats://127.0.0.1:{port}: ")
    runner = cli("failback", gone, "--probe-cmd", "true", "--resume-cmd", "true")
    assert runner.returncode == 1 and "cannot connect" in runner.stderr
    host = nats.urls[0].removeprefix("nats://")
    refused = cli("status", f"nats://{USER}:wrong-{PASSWORD}@{host}/HANDOFFS?timeout=1")
    assert refused.returncode == 2 and "cannot connect" in one_line(refused.stderr)  # the server refuses it
    nothing = cli("status", f"nats://{USER}@{host}/HANDOFFS")
    assert nothing.returncode == 2 and "set NATS_PASSWORD" in one_line(nothing.stderr)


def test_a_token_comes_from_nats_token(tmp_path: Path) -> None:
    servers = natsserver.start(tmp_path / "nats", token=PASSWORD)
    try:
        url = servers.stream_url("TOKEN", prefix="tk")
        assert cli("import-log", str(HANDOFFS), url, env={"NATS_TOKEN": PASSWORD}).returncode == 0
        assert cli("status", url, env={"NATS_TOKEN": PASSWORD}).returncode == 1
        refused = cli("status", url + "&timeout=1")
        assert refused.returncode == 2 and "cannot connect" in one_line(refused.stderr)  # no token: refused
    finally:
        servers.stop()


def test_the_printed_log_and_its_credentials() -> None:
    assert printed(f"nats://op:{PASSWORD}@h1:1,h2:2/S?prefix=p") == "nats://op@h1:1,h2:2/S?prefix=p"
    assert printed("nats://op:p@ss/w?rd@h:1/S") == "nats://op@h:1/S"  # the last @ ends it: any character in it
    assert printed("nats://h:1/S") == "nats://h:1/S" and printed("log.jsonl") == "log.jsonl"
    target = parse_url("nats://op:p@ss/w?rd@h:1/S", env={})
    assert target.servers == ("nats://h:1",) and target.credentials.password == "p@ss/w?rd"
    assert "p@ss" not in repr(target)
    assert credentials("nats://op@h:1/S", {"NATS_PASSWORD": "x"}).password == "x"
    assert credentials("nats://h:1/S", {"NATS_TOKEN": "t"}).token == "t"
    with pytest.raises(ValueError, match="set NATS_PASSWORD"):
        credentials("nats://op@h:1/S", {})
    assert taken(f"nats://op:{PASSWORD}@h:9/KEPT") == "nats://op@h:9/KEPT"  # kept in this process for opening it
    assert credentials("nats://op@h:9/KEPT", {}).password == PASSWORD

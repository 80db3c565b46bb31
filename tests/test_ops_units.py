"""The shipped systemd units and launchd plists (ops/systemd, ops/launchd): systemd-analyze verifies the units, the
timers run at the seeds' periods, every command line parses with eventlog's own parser, the plists say the same as
the units, and the failback and follow units' commands do what the alerts expect of them when run."""

from __future__ import annotations

import json
import os
import plistlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections import defaultdict
from datetime import datetime
from fnmatch import fnmatch
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from eventlog.cli import build_parser
from eventlog.observe import FINISHED
from eventlog.runners.process import DRAIN_S
from tests.conftest import ROOT, system_tool
from tests.opskit import OPS
from tests.serving import start_server
from tests.test_follow import _wait_for
from tests.test_log_path_swaps import stop_promptly
from tests.test_prom import promtool

SYSTEMD = OPS / "systemd"
LAUNCHD = OPS / "launchd"
PREFIX = "/opt/recovery-ledger"
EVENTLOG = f"{PREFIX}/.venv/bin/eventlog"
#: Each job: its subcommand and how often it runs (None: a service that keeps running). Seeds 000, 001, 002.
JOBS: dict[str, tuple[str, int | None]] = {
    "failback": ("failback", 15 * 60), "lanes": ("lanes", 3600), "catchup": ("catchup", 30 * 60),
    "follow": ("follow", None), "serve": ("serve", None),
}
#: The lane observer: a template unit and timer, one instance per lane (its env file names the lane's sources).
OBSERVE = "observe-lane@"
#: Seed 001: the lane's inputs are looked at every 10 minutes.
OBSERVE_EVERY_S = 10 * 60
#: What feeds catch-up, imported before each pass: the catchup options, and the ledger.env variable of each.
FEEDS = {"import_launchd": "CATCHUP_JOBS_DIR", "import_circuit": "CATCHUP_CIRCUIT",
         "import_quota_log": "CATCHUP_MARKERS"}


def unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A unit file's ``Key=Value`` lines by section (a key may repeat)."""
    sections: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    section = ""
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, value = line.split("=", 1)
        sections[section][key.strip()].append(value.strip())
    return sections


def env(name: str = "ledger.env") -> dict[str, str]:
    """An env file (ledger.env, lane.env) as systemd reads it: each value one word after its quotes are taken off,
    as a shell would."""
    out = {}
    for line in (SYSTEMD / name).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, value = line.split("=", 1)
            words = shlex.split(value)
            assert len(words) == 1, line  # unquoted spaces would not be one value
            out[key] = words[0]
    return out


def exec_start(name: str, values: dict[str, str] | None = None) -> list[str]:
    """The service's ExecStart as the argv systemd runs: split at spaces, each ``${VAR}`` replaced by its value
    (``values``, ledger.env's by default; an unset one is empty, as systemd makes it), within its argument."""
    (line,) = unit(SYSTEMD / f"recovery-ledger-{name}.service")["Service"]["ExecStart"]
    assert '"' not in line and "'" not in line, line
    values = env() if values is None else values
    return [re.sub(r"\$\{(\w+)\}", lambda m: values.get(m[1], ""), w) for w in line.split()]


def plist(name: str) -> dict[str, Any]:
    with (LAUNCHD / f"org.recovery-ledger.{name}.plist").open("rb") as f:
        loaded: dict[str, Any] = plistlib.load(f)
    return loaded


def parsed(argv: list[str]) -> Any:
    """eventlog's own parser on argv (a bad flag fails the test, not the process)."""
    assert argv[0] == EVENTLOG, argv
    try:
        return build_parser().parse_args(argv[1:])
    except SystemExit as exc:
        pytest.fail(f"eventlog refuses {argv[1:]}: exit {exc.code}")


def elapses(spec: str, n: int = 5) -> list[datetime]:
    """The next ``n`` times systemd would run an ``OnCalendar=`` spec."""
    out = subprocess.run([systemd_analyze(), "calendar", f"--iterations={n}", spec], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return [datetime.strptime(m, "%Y-%m-%d %H:%M:%S")
            for m in re.findall(r"(?:Next elapse|Iter\. #\d+): \w+ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", out)]


def systemd_analyze() -> str:
    """systemd-analyze's path (Debian's systemd ships it); a loud skip outside CI, a failure in CI."""
    return system_tool("systemd-analyze", "systemd")


# --- systemd ------------------------------------------------------------------------------------------------


def test_systemd_analyze_verifies_every_unit(tmp_path: Path) -> None:
    """As installed, but with this checkout as the prefix, so the ExecStart binary exists to be checked."""
    tool = systemd_analyze()
    assert (ROOT / ".venv" / "bin" / "eventlog").exists(), "run tools/setup first"
    names = sorted(p.name for p in SYSTEMD.glob("recovery-ledger-*"))
    assert names == sorted([f"recovery-ledger-{j}.service" for j in JOBS] +
                           [f"recovery-ledger-{j}.timer" for j, (_c, every) in JOBS.items() if every] +
                           [f"recovery-ledger-{OBSERVE}.service", f"recovery-ledger-{OBSERVE}.timer"])
    for name in names:
        (tmp_path / name).write_text((SYSTEMD / name).read_text().replace(PREFIX, str(ROOT)))
    lane = [f"recovery-ledger-{OBSERVE}sashiko-repair.{kind}" for kind in ("service", "timer")]  # an instance
    checked = subprocess.run([tool, "verify", "--man=no", *names, *lane], cwd=tmp_path, capture_output=True,
                             text=True, timeout=120)
    assert checked.returncode == 0 and checked.stdout + checked.stderr == "", checked.stdout + checked.stderr


def test_systemd_analyze_flags_a_broken_lane_instance(tmp_path: Path) -> None:
    """The template is checked through an instance: a misspelt key or a missing binary in it is said."""
    tool = systemd_analyze()
    text = (SYSTEMD / f"recovery-ledger-{OBSERVE}.service").read_text()
    (tmp_path / f"recovery-ledger-{OBSERVE}.service").write_text(text.replace("KillMode=", "KilMode="))
    a = subprocess.run([tool, "verify", "--man=no", f"recovery-ledger-{OBSERVE}x.service"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert "KilMode" in a.stderr
    if not Path(EVENTLOG).exists():
        assert a.returncode != 0 and "eventlog" in a.stderr


def test_systemd_analyze_does_flag_a_broken_unit(tmp_path: Path) -> None:
    """The check above can fail: a misspelt key is said on stderr, a missing binary fails."""
    tool = systemd_analyze()
    text = (SYSTEMD / "recovery-ledger-lanes.service").read_text()
    (tmp_path / "a.service").write_text(text.replace(PREFIX, str(ROOT)).replace("KillMode=", "KilMode="))
    (tmp_path / "b.service").write_text(text)  # /opt/recovery-ledger/.venv/bin/eventlog does not exist here
    a = subprocess.run([tool, "verify", "--man=no", "a.service"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60)
    assert "KilMode" in a.stderr
    if not Path(EVENTLOG).exists():
        b = subprocess.run([tool, "verify", "--man=no", "b.service"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
        assert b.returncode != 0 and "eventlog" in b.stderr


@pytest.mark.parametrize("job", [j for j, (_c, every) in JOBS.items() if every])
def test_each_timer_runs_its_service_at_the_seeds_period(job: str) -> None:
    timer = unit(SYSTEMD / f"recovery-ledger-{job}.timer")
    (spec,) = timer["Timer"]["OnCalendar"]
    times = elapses(spec)
    assert len(times) == 5
    assert {(b - a).total_seconds() for a, b in pairwise(times)} == {JOBS[job][1]}
    assert timer["Timer"].get("Unit") is None  # it starts the service of its own name
    assert timer["Install"]["WantedBy"] == ["timers.target"]
    assert unit(SYSTEMD / f"recovery-ledger-{job}.service")["Service"]["Type"] == ["oneshot"]


@pytest.mark.parametrize("job", list(JOBS))
def test_each_unit_runs_its_command_with_flags_eventlog_takes(job: str) -> None:
    command, every = JOBS[job]
    service = unit(SYSTEMD / f"recovery-ledger-{job}.service")["Service"]
    assert service["EnvironmentFile"] == ["/etc/recovery-ledger/ledger.env"]
    args = parsed(exec_start(job))
    assert args.command == command
    assert args.log == env()["LEDGER_LOG"]
    if every is None:
        assert service["Restart"] in (["always"], ["on-failure"])
    if job == "failback":
        assert args.period == every  # the heartbeat says how often the timer runs it: the alerts use it
        assert shlex.split(args.probe_cmd) == ["claude", "-p", "reply PING_OK"]  # the quotes survive
    if job == "lanes":
        assert args.period == every  # its lane_check says how often the timer runs it: RecoveryLanesDead uses it
        assert args.observe == env()["LANES_OBSERVE_DIR"] == "/etc/recovery-ledger/lanes"  # the lane files' home
    if job == "follow":
        assert args.prom.startswith("/var/lib/prometheus/node-exporter/") and args.prom.endswith(".prom")
        assert os.path.dirname(args.prom) in service["ReadWritePaths"][0].split()
    if job == "serve":
        assert args.host == "127.0.0.1"


@pytest.mark.parametrize("job", [*JOBS, OBSERVE])
def test_each_units_command_refuses_a_ledger_env_without_ledger_log_naming_it(job: str) -> None:
    """ledger.env without LEDGER_LOG (or with it misspelt): systemd passes ${LEDGER_LOG} as an empty argument.
    Runners said `cannot read : no such log`, serve served its working directory, follow exported log="": every
    unit's command now stops at once, exit 2, naming the variable."""
    values = {**(lane_values() if job == OBSERVE else env()), "LEDGER_LOG": ""}
    ran = subprocess.run(_as_here(exec_start(job, values), {}), cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "LOG is empty (is LEDGER_LOG set in ledger.env?)" in ran.stderr


def timespan_s(text: str) -> float:
    """A systemd time span (``10min``) in seconds, as systemd-analyze reads it."""
    out = subprocess.run([systemd_analyze(), "timespan", text], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return int(re.search(r"\bμs: (\d+)", out)[1]) / 1e6  # type: ignore[index]


def test_failback_units_timeout_is_over_its_longest_pass_and_under_its_period() -> None:
    """A pass starts no command past --budget and each ends within --timeout, --kill-grace and the drain of its
    pipes: so the pass, not systemd's SIGTERM at TimeoutStartSec, is what ends it, before the next is due."""
    args = parsed(exec_start("failback"))
    longest = args.budget + args.timeout + args.kill_grace + DRAIN_S
    (limit,) = unit(SYSTEMD / "recovery-ledger-failback.service")["Service"]["TimeoutStartSec"]
    assert longest < timespan_s(limit) < args.period, (longest, limit, args.period)


def test_failback_unit_leaves_the_sessions_it_started_running_with_their_traces() -> None:
    """The worked example answers `started` and leaves the session running (setsid keeps it in the unit's cgroup):
    KillMode=mixed (or the default) would SIGKILL it when the pass ends, and a PrivateTmp would delete its trace,
    which the example writes under /tmp and the pass's output points to. The other oneshot units keep mixed: their
    commands must have ended when the pass does."""
    example = (ROOT / "examples" / "failback" / "resume_async.sh").read_text()
    assert "setsid" in example and "trace=${TMPDIR:-/tmp}/" in example
    failback = unit(SYSTEMD / "recovery-ledger-failback.service")["Service"]
    assert failback["KillMode"] == ["process"]
    assert failback.get("PrivateTmp", ["no"]) == ["no"]
    for job in ("lanes", "catchup"):
        assert unit(SYSTEMD / f"recovery-ledger-{job}.service")["Service"]["KillMode"] == ["mixed"], job


def test_failback_unit_waits_as_long_for_a_session_as_the_worked_example_asks() -> None:
    """The example and the README run failback with --stale-after 2h (how long a session may take to report): the
    unit and the plist say the same, or every session slower than 30m would be handed to a person."""
    example = re.findall(r"--stale-after (\w+)", (ROOT / "examples" / "failback" / "resume_async.sh").read_text())
    readme = re.findall(r"^\$ eventlog failback .*--stale-after (\w+)", (ROOT / "README.md").read_text(),
                        flags=re.MULTILINE)
    assert example == readme == ["2h"]
    assert parsed(exec_start("failback")).stale_after == 7200
    assert parsed(plist("failback")["ProgramArguments"]).stale_after == 7200


# --- launchd ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("job", list(JOBS))
def test_each_plist_loads_and_says_what_its_systemd_unit_says(job: str) -> None:
    command, every = JOBS[job]
    job_plist = plist(job)
    assert job_plist["Label"] == f"org.recovery-ledger.{job}"
    mac = parsed(job_plist["ProgramArguments"])
    linux = parsed(exec_start(job))
    assert mac.command == command
    if job == "catchup":
        # The jobs are launchd's own on a Mac: catch-up kicks them through launchctl and waits for each to end (a
        # kick command such as `launchctl kickstart` returns at once: the next re-run would overlap, and --timeout
        # would stop nothing). Elsewhere the operator's --kick-cmd runs a job and waits.
        assert (mac.scheduler, mac.kick_cmd) == ("launchd", None) and linux.kick_cmd
        mac.scheduler, mac.kick_cmd = linux.scheduler, linux.kick_cmd
    paths = {"log", "dump", "prom", "snapshot", "keys", "resume_cmd", "enqueue_cmd", "kick_cmd", "observe", *FEEDS}
    assert {k: v for k, v in vars(mac).items() if k not in paths and not callable(v)} == \
        {k: v for k, v in vars(linux).items() if k not in paths and not callable(v)}
    assert {k for k in paths if getattr(mac, k, None)} == {k for k in paths if getattr(linux, k, None)}
    if every is None:
        assert job_plist["KeepAlive"] is True and "StartInterval" not in job_plist
    else:
        assert job_plist["StartInterval"] == every and "KeepAlive" not in job_plist
    assert job_plist["RunAtLoad"] is True
    assert job_plist["StandardErrorPath"].startswith(f"{PREFIX}/var/log/")
    assert "/usr/bin" in job_plist["EnvironmentVariables"]["PATH"].split(":")


def test_catchup_gets_time_to_stop_its_rerun() -> None:
    """Stopped, catchup sends its re-run SIGTERM and waits --kill-grace (30 s) before SIGKILL: both managers
    wait longer than that before they kill catchup itself."""
    grace = parsed(exec_start("catchup")).kill_grace
    assert plist("catchup")["ExitTimeOut"] > grace
    service = unit(SYSTEMD / "recovery-ledger-catchup.service")["Service"]
    assert service["KillMode"] == ["mixed"]
    assert int(service["TimeoutStopSec"][0].removesuffix("s")) > grace


# --- the commands, run as the units run them ------------------------------------------------------------------


def _as_here(argv: list[str], paths: dict[str, str]) -> list[str]:
    """argv with the installed paths replaced by test ones, run by this Python."""
    return [sys.executable, "-m", "eventlog", *(paths.get(a, a) for a in argv[1:])]


def test_the_failback_units_pass_writes_a_heartbeat_with_the_timers_period(tmp_path: Path) -> None:
    """What RecoveryWatcherDead compares: the heartbeat's period is the timer's, because the unit says --period."""
    log = tmp_path / "ledger.jsonl"
    shutil.copy(ROOT / "fixtures" / "handoffs_seed_98.jsonl", log)  # nothing pending: no probe runs
    values = env()
    argv = _as_here(exec_start("failback"), {values["LEDGER_LOG"]: str(log),
                                             values["FAILBACK_PROBE_CMD"]: "false",
                                             values["FAILBACK_RESUME_CMD"]: "false"})
    ran = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    dump = json.loads(subprocess.run([sys.executable, "-m", "eventlog", "replay", str(log)], cwd=ROOT,
                                     capture_output=True, text=True, timeout=120, check=True).stdout)
    (beat,) = dump["handoffs"]["watchers"].values()
    assert beat["period_s"] == JOBS["failback"][1] and beat["exit"] == "ok"
    times = elapses(unit(SYSTEMD / "recovery-ledger-failback.timer")["Timer"]["OnCalendar"][0], 2)
    assert (times[1] - times[0]).total_seconds() == beat["period_s"]


def test_the_follow_units_command_writes_a_prom_file_node_exporter_reads(tmp_path: Path) -> None:
    """Its exact command line, with test paths: a ``.prom`` file promtool accepts, readable by others, and exit 0
    on SIGTERM (how systemd and launchd stop it)."""
    tool = promtool()
    log, textfile = tmp_path / "ledger.jsonl", tmp_path / "node-exporter"
    textfile.mkdir()
    shutil.copy(ROOT / "fixtures" / "handoffs_watcher_error.jsonl", log)
    args = parsed(exec_start("follow"))
    prom = textfile / os.path.basename(args.prom)
    argv = _as_here(exec_start("follow"), {args.log: str(log), args.dump: str(tmp_path / "dump.json"),
                                           args.prom: str(prom), args.snapshot: str(tmp_path / "follow.snap")})
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for(lambda: "recovery_watcher_last_run_error" in prom.read_text(), timeout=60)
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert prom.stat().st_mode & 0o004  # node_exporter runs as another user
    # no temporary file left for it to read; beside the .prom only follow's lock, which it never reads (no .prom)
    assert sorted(p.name for p in textfile.iterdir()) == sorted([prom.name, f".{prom.name}.follow.lock"])
    checked = subprocess.run([tool, "check", "metrics"], input=prom.read_text(), capture_output=True, text=True,
                             timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f'recovery_watcher_last_run_error{{log="{log}",watcher="watcher-a"}} 1' in prom.read_text()


def test_operations_doc_lists_every_shipped_file() -> None:
    """Every file under ops/ is in docs/OPERATIONS.md's table (``a.{b,c}`` and ``*`` as a shell expands them)."""
    text = (ROOT / "docs" / "OPERATIONS.md").read_text()
    patterns = []
    for listed in re.findall(r"^\| `(ops/[^`]+)` \|", text, flags=re.MULTILINE):
        braces = re.fullmatch(r"(.*)\{(.*)\}(.*)", listed)
        patterns += [braces[1] + alt + braces[3] for alt in braces[2].split(",")] if braces else [listed]
    shipped = sorted(p.relative_to(ROOT).as_posix() for p in OPS.rglob("*") if p.is_file())
    assert len(shipped) >= 20
    for path in shipped:
        assert any(fnmatch(path, pattern) for pattern in patterns), path


def _read_only(directory: Path) -> list[str]:
    """A command prefix that runs a process seeing ``directory`` read-only, as ``ProtectSystem=strict`` shows a path
    outside ``ReadWritePaths=`` (a bind mount in a mount namespace of its own); a skip where that is not allowed."""
    mount = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0"'
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-m", "sh", "-c", mount, str(directory)], capture_output=True, timeout=60).returncode != 0:
        pytest.skip("a read-only bind mount needs unshare -m and mount (root)")
    return ["unshare", "-m", "sh", "-c", mount + ' && exec "$@"', str(directory)]


def test_the_serve_unit_says_when_its_log_is_outside_its_read_write_paths(tmp_path: Path) -> None:
    """ledger.env invited a log anywhere, and the serve unit may write only its ReadWritePaths=: every POST got 503
    while /healthz said "following". The unit and ledger.env now say it; serve says it at start and on /healthz,
    naming the read-only file system and ReadWritePaths=."""
    service = unit(SYSTEMD / "recovery-ledger-serve.service")["Service"]
    assert service["ProtectSystem"] == ["strict"] and service["ReadWritePaths"] == ["/var/lib/recovery-ledger"]
    assert "ReadWritePaths=" in (SYSTEMD / "ledger.env").read_text().split("LEDGER_LOG=")[0]
    data = tmp_path / "srv"
    data.mkdir()
    log = data / "ledger.jsonl"
    shutil.copy(ROOT / "fixtures" / "handoffs_seed_98.jsonl", log)
    server = start_server(log, tmp_path, via=_read_only(data))
    try:
        why = (f"{log} is on a read-only file system (under systemd's ProtectSystem=strict: a path the unit's "
               "ReadWritePaths= does not hold): every append and decision to it is refused")
        assert why in server.stderr.read_text()
        health = server.client(None).get("/healthz").json()
        assert (health["status"], health["writable"], health["write_problem"]) == ("following", False, why)
    finally:
        stop_promptly(server)


def test_the_steps_to_run_as_another_user_give_it_all_the_units_read_as_ledger(tmp_path: Path) -> None:
    """OPERATIONS said to change User= and chown /var/lib/recovery-ledger only: /etc/recovery-ledger stayed ledger's
    (0750), so serve run as that user could not read its key file (exit 2 every 10 s) and the resume, enqueue and
    kick scripts there could not be run. The block, run on the shipped units (sudo, id and chown stubbed), moves
    every unit to the user and hands it every directory the doc gives to ledger."""
    text = (ROOT / "docs" / "OPERATIONS.md").read_text()
    section = text.split("### Another user than `ledger`", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    units = tmp_path / "system"
    units.mkdir()
    for path in SYSTEMD.glob("recovery-ledger-*"):
        shutil.copy(path, units)
    script = ("sudo() { \"$@\"; }\nid() { echo aiko; }\nchown() { echo \"$@\" >> chowned; }\n"
              "systemctl() { :; }\n" + block.replace("/etc/systemd/system/", f"{units}/"))
    subprocess.run(["sh", "-ec", script], cwd=tmp_path, check=True, timeout=60)
    for path in units.glob("*.service"):
        service = unit(path)["Service"]
        assert (service["User"], service["Group"]) == (["aiko"], ["aiko"]), path.name
    (chowned,) = (tmp_path / "chowned").read_text().splitlines()
    assert chowned.split()[:2] == ["-R", "aiko:aiko"], chowned
    paths = chowned.split()[2:]
    given = re.findall(r"install -d -o ledger -g ledger -m \d+ (\S+)", text)  # the directories ledger is given
    given += re.findall(r"useradd .*--home-dir (\S+)", text)
    assert "/etc/recovery-ledger" in given and "/var/lib/recovery-ledger" in given
    for directory in given:
        assert any(directory == p or directory.startswith(p + "/") for p in paths), directory
    for rule in ("sudo -u aiko eventlog keys add", "setfacl -m u:aiko:rwx /var/lib/prometheus/node-exporter"):
        assert rule in " ".join(section.split("\n## ", 1)[0].split()), rule


# --- what feeds catch-up: the jobs, the circuit and the markers, imported before each pass -------------------


def test_the_catchup_unit_and_plist_import_the_jobs_circuit_and_markers_before_each_pass() -> None:
    """Seed 002's markers reach the log only through `eventlog import`: both managers' catch-up passes import the
    jobs, the guard's circuit state and its markers first, the paths set once (ledger.env; the plist, at the seed's
    ~/Library paths)."""
    linux, mac = parsed(exec_start("catchup")), parsed(plist("catchup")["ProgramArguments"])
    values = env()
    assert (linux.import_launchd, linux.import_circuit, linux.import_quota_log) == (
        values["CATCHUP_JOBS_DIR"], values["CATCHUP_CIRCUIT"], [values["CATCHUP_MARKERS"]])
    assert (mac.import_launchd, mac.import_circuit, mac.import_quota_log) == (
        "~/Library/LaunchAgents", "~/.claude-quota-guard/state.json", ["~/Library/Logs/*.err"])
    text = (ROOT / "docs" / "OPERATIONS.md").read_text()
    for option, variable in FEEDS.items():
        assert variable in text and "--" + option.replace("_", "-") in text


def _catchup_unit(tmp_path: Path, markers: str, at: str) -> subprocess.CompletedProcess[str]:
    """The catch-up unit's exact command, ledger.env's paths pointed at ``tmp_path`` (a jobs directory with one
    guarded 09:00 job, the guard's circuit state, ``markers``), judged at ``at`` in UTC."""
    jobs = tmp_path / "jobs"
    jobs.mkdir(exist_ok=True)
    with (jobs / "com.lily.brief.plist").open("wb") as f:
        plistlib.dump({"Label": "com.lily.brief", "ProgramArguments": ["/usr/bin/python3", "claude-quota-guard.py"],
                       "StartCalendarInterval": {"Hour": 9, "Minute": 0}}, f)
    (tmp_path / "state.json").write_text('{"open_until": null, "reason": "quota"}')
    values = {**env(), "LEDGER_LOG": str(tmp_path / "ledger.jsonl"), "CATCHUP_JOBS_DIR": str(jobs),
              "CATCHUP_CIRCUIT": str(tmp_path / "state.json"), "CATCHUP_MARKERS": markers,
              "CATCHUP_PROBE_CMD": "echo PING_OK", "CATCHUP_KICK_CMD": "true"}
    (tmp_path / "ledger.jsonl").touch()
    return subprocess.run([*_as_here(exec_start("catchup", values), {}), "--at", at], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "TZ": "UTC"})


def test_the_catchup_units_pass_imports_todays_skip_and_re_runs_it(tmp_path: Path) -> None:
    """The shipped pass on a log nothing else writes to: the skip the guard wrote to a job's stderr file is
    imported, and the job re-run (before, the pass read only the log: no candidate, and it said nothing)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "com.lily.brief.err").write_text(
        "CLAUDE_QUOTA_JOB_SKIPPED job=com.lily.brief reason=quota remaining=60s ts=1787302805\n")  # 09:00:05 UTC
    ran = _catchup_unit(tmp_path, str(logs / "*.err"), "2026-08-21T10:00:00+00:00")
    assert ran.returncode == 0, ran.stderr
    types = [json.loads(line)["type"] for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert types == ["job_registered", "job_skipped", "catchup_kicked", "catchup_finished"]
    assert "com.lily.brief: exited (exit 0)" in ran.stdout


def test_the_catchup_units_pass_says_when_nothing_feeds_a_jobs_markers(tmp_path: Path) -> None:
    """Markers written where the glob does not look: the pass says the glob matches nothing and, 2 h after the job's
    slot, that nothing feeds its markers, and fails (the unit shows as failed), rather than 'no candidates'."""
    (tmp_path / "elsewhere").mkdir()
    ran = _catchup_unit(tmp_path, str(tmp_path / "elsewhere" / "*.err"), "2026-08-21T11:30:00+00:00")
    assert ran.returncode == 1
    assert f"no file matches {tmp_path}/elsewhere/*.err" in ran.stderr
    assert "com.lily.brief: nothing feeds its markers" in ran.stderr
    assert "is `eventlog import quota-log` running" in ran.stderr


def test_the_install_steps_enable_lanes_and_catch_up_only_where_their_work_runs(tmp_path: Path) -> None:
    """OPERATIONS enabled the failback, lanes and catch-up timers in one command, so a host that only hands work off
    got a failed catch-up unit every 30 minutes for ever: with ledger.env's own paths the pass names what it cannot
    import and that the log holds no guarded job (rightly: it cannot tell jobs nothing feeds from no jobs). Now the
    failback timer is enabled alone, lanes and catch-up each only where its work runs, on a Mac too, and the pass
    says to stop its timer."""
    text = (ROOT / "docs" / "OPERATIONS.md").read_text()
    enables = [line for line in text.splitlines() if line.startswith("sudo systemctl enable --now recovery-ledger-")]
    for job in ("lanes", "catchup"):
        [line] = [x for x in enables if f"recovery-ledger-{job}.timer" in x]
        assert "failback" not in line and "# only where" in line, line
    assert "org.recovery-ledger.*.plist ~/Library/LaunchAgents/" not in text  # launchd loads each at every login

    log = tmp_path / "ledger.jsonl"
    shutil.copy(ROOT / "fixtures" / "handoffs_seed_98.jsonl", log)  # failback's work only
    ran = subprocess.run(_as_here(exec_start("catchup"), {env()["LEDGER_LOG"]: str(log)}), cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 1 and "no guarded job in the log" in ran.stderr and "stop its timer" in ran.stderr


def _mac_catchup_pass(home: Path, log: Path) -> subprocess.CompletedProcess[str]:
    """The catch-up plist's ProgramArguments as launchd runs them, in a HOME of ``home`` (``~`` is expanded by
    eventlog), on ``log``."""
    argv = _as_here(plist("catchup")["ProgramArguments"], {f"{PREFIX}/var/ledger.jsonl": str(log)})
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": str(home)})


def test_the_catchup_plist_never_takes_the_ledgers_own_plists_for_guarded_jobs(tmp_path: Path) -> None:
    """OPERATIONS copies the ledger's plists into ~/Library/LaunchAgents, which the catch-up plist imports; its own
    arguments name ~/.claude-quota-guard/state.json, so the seed's any-substring test registered catch-up itself as a
    guarded job: "no guarded job" could never fire, and a retire did not stick. Now the ledger's plists are skipped
    ("ours") and only the guard program makes a job guarded; a log an earlier import wrote says how to retire it."""
    home, log = tmp_path / "home", tmp_path / "ledger.jsonl"
    agents = home / "Library" / "LaunchAgents"
    agents.mkdir(parents=True)
    for job in ("follow", "failback", "serve", "catchup"):
        shutil.copy(LAUNCHD / f"org.recovery-ledger.{job}.plist", agents)
    log.touch()
    ran = _mac_catchup_pass(home, log)
    assert ran.returncode == 1 and "no guarded job in the log (no job_registered at all)" in ran.stderr, ran.stderr
    assert log.read_text() == ""
    out = subprocess.run([sys.executable, "-m", "eventlog", "import", "launchd", str(log), str(agents), "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["registered"] == [] and report["ours"] == [f"org.recovery-ledger.{j}" for j in
                                                             ("catchup", "failback", "follow", "serve")]

    # a log an earlier import fed: the pass names the registration and the line that retires it, which sticks
    log.write_text('{"type": "job_registered", "ts": "2026-08-21T00:00:00+00:00", "seq": 1, "label": '
                   '"org.recovery-ledger.catchup", "guarded": true, "calendar": null, "interval_s": 1800}\n')
    ran = _mac_catchup_pass(home, log)
    assert ran.returncode == 1
    assert "org.recovery-ledger.catchup: registered in" in ran.stderr and "no guarded job in the log" not in ran.stderr
    (retire,) = re.findall(r"(printf '%s\\n' '[^']*' \| eventlog append \S+)", ran.stderr)
    bin_dir = os.path.dirname(sys.executable)
    subprocess.run(retire, shell=True, check=True, cwd=ROOT, timeout=60,
                   env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    ran = _mac_catchup_pass(home, log)
    assert ran.returncode == 1 and "no guarded job in the log (none of its 1 registered job(s)" in ran.stderr
    assert "org.recovery-ledger.catchup: registered" not in ran.stderr
    assert [json.loads(line)["guarded"] for line in log.read_text().splitlines()] == [True, False]


# --- what feeds lane state: the lane observer, one instance per lane ----------------------------------------


@pytest.mark.parametrize("job", [*JOBS, OBSERVE])
def test_no_unit_passes_a_zone_that_an_unset_variable_would_leave_empty(job: str) -> None:
    """The units take the zone from TZ in ledger.env (docs/OPERATIONS.md), never as --assume-tz: `--assume-tz
    ${VAR}` with VAR unset would be `--assume-tz ""`, which every command refuses (exit 2); once it read as "no
    zone", and every line without an offset as bad."""
    values = lane_values() if job == OBSERVE else env()
    assert "TZ" not in values  # the shipped ledger.env leaves it to the operator: the machine's zone
    for argv in (exec_start(job, values), plist(job.rstrip("@"))["ProgramArguments"]):
        assert getattr(parsed(argv), "assume_tz", None) is None, argv


def lane_values(**lane: str) -> dict[str, str]:
    """ledger.env and a lane's env file (ops/systemd/lane.env unless ``lane`` is given), as the instance reads them."""
    return {**env(), **(env("lane.env") if not lane else lane)}


def test_the_lane_observer_runs_every_10_minutes_per_lane() -> None:
    """Seed 001 and the README: lane state comes from `observe lane` every 10 minutes; nothing else feeds it."""
    timer = unit(SYSTEMD / f"recovery-ledger-{OBSERVE}.timer")
    times = elapses(timer["Timer"]["OnCalendar"][0])
    assert {(b - a).total_seconds() for a, b in pairwise(times)} == {OBSERVE_EVERY_S}
    assert timer["Timer"].get("Unit") is None and timer["Install"]["WantedBy"] == ["timers.target"]
    service = unit(SYSTEMD / f"recovery-ledger-{OBSERVE}.service")["Service"]
    assert service["Type"] == ["oneshot"]
    assert service["EnvironmentFile"] == ["/etc/recovery-ledger/ledger.env", "/etc/recovery-ledger/lanes/%i.env"]
    args = parsed(exec_start(OBSERVE, lane_values()))
    assert (args.command, args.source, args.log, args.product) == ("observe", "lane", env()["LEDGER_LOG"],
                                                                  "sashiko-repair")
    lane = env("lane.env")
    assert (args.worker_log, args.repo, args.progress, args.stop_file) == (
        lane["LANE_WORKER_LOG"], lane["LANE_REPO"], lane["LANE_PROGRESS"], lane["LANE_STOP_FILE"])


def test_the_lane_observers_command_feeds_the_lane_the_lanes_check_judges(tmp_path: Path) -> None:
    """The instance's exact command, with a lane's env file that gives only its progress file (the other sources
    unset, as the env file allows): it appends the lane's status, and the lanes check then judges that lane."""
    log, progress = tmp_path / "ledger.jsonl", tmp_path / "progress.json"
    progress.write_text('{"state": "running"}\n')
    values = lane_values(LANE_PRODUCT="sashiko-repair", LANE_PROGRESS=str(progress))
    argv = _as_here(exec_start(OBSERVE, values), {values["LEDGER_LOG"]: str(log)})
    ran = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert [json.loads(line)["type"] for line in log.read_text().splitlines()] == ["status_updated"]
    again = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "nothing changed" in again.stdout  # safe every 10 minutes
    only_checks = {**env(), "LANES_OBSERVE_DIR": ""}  # the lanes are fed by their observers: the pass only checks
    check = subprocess.run(_as_here(exec_start("lanes", only_checks), {env()["LEDGER_LOG"]: str(log),
                                                                       env()["LANES_ENQUEUE_CMD"]: "false"}),
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    assert "sashiko-repair: moving" in check.stdout


def test_the_lanes_units_pass_observes_each_lane_file_then_writes_its_heartbeat_at_the_timers_period(
        tmp_path: Path) -> None:
    """The shipped lanes unit, with LANES_OBSERVE_DIR holding the shipped lane.env (its paths made real, its
    other sources unset): one pass observes the lane and checks it, and its lane_check states the timer's period,
    what RecoveryLanesDead and status's lanes_late compare with. No observe-lane@ timer is needed."""
    log, lanes_dir, progress = tmp_path / "ledger.jsonl", tmp_path / "lanes", tmp_path / "progress.json"
    lanes_dir.mkdir()
    progress.write_text('{"state": "running"}\n')
    shipped = (SYSTEMD / "lane.env").read_text()
    lane = env("lane.env")
    text = shipped.replace(lane["LANE_PROGRESS"], str(progress))
    for key in ("LANE_WORKER_LOG", "LANE_REPO", "LANE_STOP_FILE"):
        text = text.replace(f"{key}={lane[key]}", f"{key}=")
    (lanes_dir / "sashiko-repair.env").write_text(text)
    values = {**env(), "LEDGER_LOG": str(log), "LANES_ENQUEUE_CMD": "false", "LANES_OBSERVE_DIR": str(lanes_dir)}
    argv = exec_start("lanes", values)
    ran = subprocess.run([sys.executable, "-m", "eventlog", *argv[1:]], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "observed sashiko-repair: status_updated" in ran.stdout and "sashiko-repair: moving" in ran.stdout
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["type"] for e in lines] == ["status_updated", "lane_check"]
    times = elapses(unit(SYSTEMD / "recovery-ledger-lanes.timer")["Timer"]["OnCalendar"][0], 2)
    assert lines[-1]["period_s"] == (times[1] - times[0]).total_seconds() == JOBS["lanes"][1]
    assert lines[-1]["exit"] == "ok"


def test_the_lanes_check_of_a_log_no_observer_feeds_says_so_and_fails(tmp_path: Path) -> None:
    """The shipped lanes timer on a log with no lane judged nothing and exited 0 for ever: now it names what feeds
    lanes and exits 1, so its unit shows as failed."""
    log = tmp_path / "ledger.jsonl"
    shutil.copy(ROOT / "fixtures" / "handoffs_seed_98.jsonl", log)
    check = subprocess.run(_as_here(exec_start("lanes"), {env()["LEDGER_LOG"]: str(log),
                                                          env()["LANES_ENQUEUE_CMD"]: "false"}),
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert check.returncode == 1
    assert "no lane in the log" in check.stderr and "eventlog observe lane" in check.stderr


def test_the_lane_observer_plist_says_what_its_systemd_instance_says() -> None:
    with (LAUNCHD / "org.recovery-ledger.observe-lane.plist").open("rb") as f:
        job: dict[str, Any] = plistlib.load(f)
    assert job["Label"] == "org.recovery-ledger.observe-lane.sashiko-repair"
    mac, linux = parsed(job["ProgramArguments"]), parsed(exec_start(OBSERVE, lane_values()))
    paths = {"log", "worker_log", "repo", "progress", "stop_file"}
    linux.finished_regex, linux.ref = linux.finished_regex or FINISHED, linux.ref or "HEAD"  # empty: the default
    assert {k: v for k, v in vars(mac).items() if k not in paths and not callable(v)} == \
        {k: v for k, v in vars(linux).items() if k not in paths and not callable(v)}
    assert {k for k in paths if getattr(mac, k)} == {k for k in paths if getattr(linux, k)}
    assert job["StartInterval"] == OBSERVE_EVERY_S and job["RunAtLoad"] is True and "KeepAlive" not in job
    assert job["StandardErrorPath"].startswith(f"{PREFIX}/var/log/")

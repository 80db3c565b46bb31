"""The one subprocess runner (``eventlog.runners.process.run``): every way a command can go."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from eventlog.runners import process
from eventlog.runners.process import Ran, run, split_command
from tests.fakes.scheduler import alive

PY = sys.executable




def wait_for_file(path: Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.01)
    raise AssertionError(f"{path} was never written")


def gone(pid: int, within: float = 5.0) -> bool:
    """Whether ``pid`` ends within ``within`` s: a signalled process dies when it is next scheduled, not at once."""
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_exit_0_with_stdout_and_stderr_captured() -> None:
    ran = run([PY, "-c", "import sys; print('out'); print('err', file=sys.stderr)"], timeout_s=30, grace_s=1,
              capture_stdout=True, capture_stderr=True)
    assert ran == Ran(True, 0, False, "out\n", "err\n")
    assert ran.ok and ran.failure(30) is None


def test_non_zero_exit_is_reported_as_such() -> None:
    ran = run([PY, "-c", "raise SystemExit(3)"], timeout_s=30, grace_s=1)
    assert ran.started and ran.exit == 3 and not ran.timed_out
    assert not ran.ok and ran.failure(30) == "exit 3"


@pytest.mark.parametrize("how", ["not_found", "not_executable"])
def test_a_command_that_cannot_start_is_not_an_exit_status(tmp_path: Path, how: str) -> None:
    cmd = tmp_path / "cmd"
    if how == "not_executable":
        cmd.write_text("#!/bin/sh\necho hi\n")
        cmd.chmod(0o644)
    ran = run([str(cmd)], timeout_s=30, grace_s=1)
    assert not ran.started and ran.exit is None and not ran.timed_out
    assert ran.error is not None and str(cmd) in ran.error
    assert ran.failure(30) == f"could not start: {ran.error}"


def test_no_shell_reads_the_arguments(tmp_path: Path) -> None:
    marker = tmp_path / "touched"
    ran = run([PY, "-c", "import sys; print(sys.argv[1])", f"$(touch {marker}); echo"], timeout_s=30, grace_s=1)
    assert ran.stdout == f"$(touch {marker}); echo\n"
    assert not marker.exists()


def test_the_environment_is_ours_plus_what_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FROM_US", "1")
    ran = run([PY, "-c", "import os; print(os.environ['FROM_US'], os.environ['GIVEN'])"], env={"GIVEN": "2"},
              timeout_s=30, grace_s=1)
    assert ran.stdout == "1 2\n"


def test_stdout_not_captured_goes_to_our_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    ran = run([PY, "-c", "print('to stderr')"], timeout_s=30, grace_s=1, capture_stdout=False)
    assert ran.stdout == "" and ran.ok
    out, err = capfd.readouterr()
    assert out == "" and "to stderr" in err


def test_a_command_runs_in_its_own_process_group_and_session() -> None:
    ran = run([PY, "-c", "import os; print(os.getpgid(0) == os.getpid(), os.getsid(0) == os.getpid())"],
              timeout_s=30, grace_s=1)
    assert ran.stdout == "True True\n"


def test_over_the_timeout_the_group_gets_sigterm(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        f"open({str(pids)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    ran = run([PY, "-c", script], timeout_s=1.5, grace_s=10)
    assert ran.started and ran.timed_out
    assert ran.exit == -signal.SIGTERM  # the leader ended by the SIGTERM, within the grace
    assert gone(int(wait_for_file(pids)))  # its child, in the same group, too
    assert ran.failure(1.5) == "timed out after 1.5 s; its process group was stopped"


def test_sigterm_ignored_then_sigkill_after_the_grace(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = (
        "import signal, subprocess, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = subprocess.Popen(['sleep', '60'])\n"  # inherits SIG_IGN of SIGTERM
        f"open({str(pids)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    ran = run([PY, "-c", script], timeout_s=1.5, grace_s=0.3)
    assert ran.timed_out and ran.exit == -signal.SIGKILL
    assert gone(int(wait_for_file(pids)))


def test_output_printed_before_the_timeout_is_kept() -> None:
    ran = run([PY, "-c", "import time; print('begun', flush=True); time.sleep(60)"], timeout_s=1.5, grace_s=1)
    assert ran.timed_out and ran.stdout == "begun\n"


def test_a_process_that_left_the_group_cannot_hold_the_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "DRAIN_S", 0.5)
    pids = tmp_path / "pids"
    script = (
        "import os, subprocess, time\n"
        "child = subprocess.Popen(['sleep', '60'], start_new_session=True)\n"  # keeps our stdout pipe open
        f"open({str(pids)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    try:
        ran = run([PY, "-c", script], timeout_s=1.5, grace_s=0.2, capture_stdout=True)
        # it returns although the pipe is still open: the leader's end is what is reported
        assert ran.timed_out and ran.exit == -signal.SIGTERM
    finally:
        orphan = int(wait_for_file(pids))
        if alive(orphan):
            os.kill(orphan, signal.SIGKILL)


@pytest.mark.parametrize("pipe", ["stdout", "stderr"])
def test_a_child_left_running_holding_a_pipe_does_not_hold_the_command(tmp_path: Path, pipe: str) -> None:
    """An asynchronous command (work started in the background, exit 0 at once) has ended when it exits: no
    timeout, what it printed is its result, and the child it left running is neither waited for nor stopped."""
    late = tmp_path / "late"
    to = "" if pipe == "stdout" else " 1>&2"
    script = f"(sleep 3; echo done > {late}){to} & echo task/bg{to}; exit 0"
    began = time.monotonic()
    ran = run(["sh", "-c", script], timeout_s=1.5, grace_s=1, capture_stdout=True, capture_stderr=True)
    took = time.monotonic() - began
    assert ran.ok and not ran.timed_out and ran.exit == 0, ran
    assert getattr(ran, pipe) == "task/bg\n"
    assert took < 1.4, took  # back once the command exited (and its pipes were read a moment more), not at EOF
    assert wait_for_file(late, 5) == "done\n"  # the child it left ran to its end


def test_over_the_timeout_a_child_left_holding_the_pipe_is_stopped_with_the_group(tmp_path: Path) -> None:
    """The timeout still applies while the command itself runs: then its group (and such a child) is stopped."""
    late = tmp_path / "late"
    ran = run(["sh", "-c", f"(sleep 2; echo done > {late}) & echo begun; sleep 30"], timeout_s=1, grace_s=1)
    assert ran.timed_out and ran.stdout == "begun\n"
    time.sleep(1.5)
    assert not late.exists()


@pytest.mark.parametrize(("script", "said"), [
    ("exit 127", "exit 127"),
    ("exit 126", "exit 126"),
    ("kill -9 $$", "killed by SIGKILL"),
    ("sleep 30", "timed out after 1 s; its process group was stopped"),
    ("exit 3", None),
    ("exit 124", None),  # timeout(1) around the command: it said it timed out
])
def test_a_command_that_gave_no_answer_of_its_own(script: str, said: str | None) -> None:
    ran = run(["sh", "-c", script], timeout_s=1, grace_s=0.5)
    assert ran.no_answer(1) == said
    assert run(["/nonexistent/cmd"], timeout_s=1, grace_s=0.5).no_answer(1) == "could not start: /nonexistent/cmd: " \
        "No such file or directory"


def test_excerpt_cuts_a_long_text_and_says_so() -> None:
    assert process.excerpt("  a\n b\tc  ") == "a b c"
    assert process.excerpt("x" * 200) == "x" * 200
    assert process.excerpt("x" * 199 + "yz") == "x" * 199 + "y... [cut: 201 characters in all]"
    assert process.excerpt("ab" + "x" * 199, end=True) == "[cut: 201 characters in all] ..." + "b" + "x" * 199
    assert process.excerpt("abcdef", 3) == "abc... [cut: 6 characters in all]"


def test_split_command() -> None:
    assert split_command("probe --say 'PING OK'", "--probe-cmd") == ["probe", "--say", "PING OK"]
    with pytest.raises(ValueError, match="--probe-cmd is empty"):
        split_command("  ", "--probe-cmd")
    with pytest.raises(ValueError, match="--kick-cmd"):
        split_command("kick 'unclosed", "--kick-cmd")


#: A stop signal that lands inside ``Popen.poll()`` after it took the Popen's waitpid lock: the handler raised there
#: once (CI saw a lanes pass hang for good on SIGTERM); the child here stands for the enqueue command.
LOCK_HELD_STOP = """
import signal, subprocess, sys
from eventlog.runners import process
poll = subprocess.Popen._internal_poll
def poll_with_a_stop(self, *args, **kwargs):
    if not self._waitpid_lock.acquire(False):
        return None
    signal.raise_signal(signal.SIGTERM)  # the handler runs here, the lock held, before any try
    self._waitpid_lock.release()
    return poll(self, *args, **kwargs)
subprocess.Popen._internal_poll = poll_with_a_stop
with process.stop_on_signals():
    try:
        process.run([sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=30, grace_s=1)
    except process.Interrupted as stop:
        print("stopped", stop.signal, getattr(stop, "started", False))
"""


def test_a_stop_inside_popen_poll_stops_the_command_and_never_hangs() -> None:
    import subprocess

    done = subprocess.run([sys.executable, "-c", LOCK_HELD_STOP], capture_output=True, text=True, timeout=20,
                          check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "stopped SIGTERM True"), done.stderr


def test_only_the_start_and_the_end_of_a_long_output_are_kept_and_the_rest_is_counted() -> None:
    """Review R9: a command's output was held whole. Its first HEAD_BYTES and last TAIL_BYTES are kept (whole
    lines: a line's end alone is no line of its own), a line in between says how many bytes were not, and
    ``said`` counts them."""
    body = "x" * 99 + "\n"  # 100-byte lines
    n = (process.HEAD_BYTES + process.TAIL_BYTES) // 100 + 5000
    code = f"import sys; sys.stdout.write({body!r} * {n}); sys.stdout.write('last line'); sys.stderr.write('e' * 9)"
    ran = run([sys.executable, "-c", code], timeout_s=60, grace_s=1, capture_stderr=True)
    assert ran.ok and ran.stderr == "e" * 9 and ran.stderr_cut == 0
    total = n * 100 + len("last line")
    head, mark, tail = ran.stdout.split("\n[... ", 1)[0], *ran.stdout.split("\n[... ", 1)[1].split(" ...]\n", 1)
    assert mark == f"{ran.stdout_cut} bytes not kept"
    assert len(head) + 1 + len(tail) + ran.stdout_cut == total
    assert head.split("\n") == ["x" * 99] * (len(head.split("\n")))  # whole lines only
    assert tail.endswith("\nlast line") and set(tail.split("\n")[:-1]) == {"x" * 99}
    assert len(head) <= process.HEAD_BYTES and len(tail) <= process.TAIL_BYTES
    said = Ran(True, 1, stdout=ran.stdout, stdout_cut=ran.stdout_cut).said()
    assert said.startswith(f"[cut: {len(' '.join(ran.stdout.split()))} characters kept and {ran.stdout_cut} "
                           "bytes more] ...") and said.endswith(" last line")

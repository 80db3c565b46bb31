"""The docs stand alone: the event reference is generated and fresh, no doc points outside the repository,
and the README's examples run as written and print what it shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import msgspec.inspect as mi
import pytest

from eventlog.events import EVENT_TYPES, PROJECT_FIELDS
from eventlog.reference import events_markdown
from tests.conftest import ROOT, run_cli

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_event_reference_is_generated_and_fresh() -> None:
    path = ROOT / "docs" / "EVENTS.md"
    assert path.read_text(encoding="utf-8") == events_markdown(), "docs/EVENTS.md is stale: run tools/gen-docs"
    check = subprocess.run([str(ROOT / "tools" / "gen-docs"), "--check"], capture_output=True, text=True,
                           check=False)
    assert check.returncode == 0, check.stderr


def test_every_event_type_and_field_is_in_the_reference() -> None:
    text = (ROOT / "docs" / "EVENTS.md").read_text(encoding="utf-8")
    rows = {m[1]: m[0] for m in re.finditer(r"^\| `([a-z_]+)` \|.*$", text, re.M)}
    assert set(rows) - {"type", "ts", "seq", "v", "batch_end"} == set(EVENT_TYPES)  # the envelope has a table too
    for name, cls in EVENT_TYPES.items():
        info = mi.type_info(cls)
        assert isinstance(info, mi.StructType)
        for field in info.fields:
            if field.encode_name not in {"ts", "seq", "v", "batch_end"}:
                assert f"`{field.encode_name}`: " in rows[name], (name, field.encode_name)
        assert cls.__doc__ and " ".join(cls.__doc__.split()).replace("``", "`") in rows[name]


@pytest.mark.parametrize("doc", DOCS, ids=[p.name for p in DOCS])
def test_no_doc_sends_a_reader_outside_the_repository(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    assert "../shared" not in text and "spec/" not in text
    for target in re.findall(r"\]\(([^)#\s]+)", text):  # markdown links
        if re.match(r"[a-z]+://", target):
            continue
        resolved = (doc.parent / target).resolve()
        assert resolved.is_relative_to(ROOT) and resolved.exists(), (doc.name, target)
    for name in set(re.findall(r"\b([A-Z][A-Z_]+\.md)\b", text)):  # a doc named in words
        assert (doc.parent / name).exists() or (ROOT / "docs" / name).exists() or (ROOT / name).exists(), name


# --- the README's examples ---------------------------------------------------------------------------


def examples(readme: str) -> list[tuple[str, list[str]]]:
    """Each ``$ command`` of the README's sh blocks (continuation lines joined) with the output shown under it."""
    out: list[tuple[str, list[str]]] = []
    for block in re.finditer(r"^( *)```sh\n(.*?)^\1```", readme, re.M | re.S):
        indent = len(block[1])
        lines = [line[indent:] for line in block[2].splitlines()]
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                i += 1
                continue
            command = lines[i][2:]
            while command.endswith("\\"):
                i += 1
                command = command[:-1] + lines[i].strip()
            i += 1
            shown = []
            while i < len(lines) and not lines[i].startswith("$ "):
                shown.append(lines[i])
                i += 1
            out.append((command, shown))
    return out


def matches(shown: list[str], got: list[str]) -> bool:
    """Whether ``got`` is ``shown``: a line of just ``...`` stands for any number of lines, a line ending in
    ``...`` (a comment after it aside) for any line that starts as it does (a random key, say)."""
    if not shown:
        return not got
    line = re.sub(r"\.\.\.\s+#.*$", "...", shown[0]).rstrip()
    if line.strip() == "...":
        return any(matches(shown[1:], got[k:]) for k in range(len(got) + 1))
    if not got:
        return False
    same = got[0].startswith(line[:-3]) if line.endswith("...") else got[0].rstrip() == line
    return same and matches(shown[1:], got[1:])


#: The address the README's server examples show; the test's server takes a free port and stands in for it.
SHOWN_ADDRESS = "127.0.0.1:8080"


def test_the_readme_examples_run_as_written(tmp_path: Path) -> None:
    """From a fresh directory that holds what the repository's root holds, in the README's order, in one shell's
    state (a variable set by one example is there for the next), ``eventlog serve ... &`` a real server."""
    for name in ("fixtures", "tools", ".venv"):
        (tmp_path / name).symlink_to(ROOT / name)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    found = examples((ROOT / "README.md").read_text(encoding="utf-8"))
    commands = [c for c, _ in found]
    for shown_first in ("eventlog status ", "eventlog explain ", "eventlog serve ", "curl "):
        assert any(c.startswith(shown_first) for c in commands), shown_first
    state = tmp_path / ".shell-state"
    state.write_text("")
    address, servers = SHOWN_ADDRESS, []
    try:
        for command, shown in found:
            command = command.replace(SHOWN_ADDRESS, address)
            if command.startswith("eventlog serve "):
                assert command.endswith(" &"), command  # the README's server runs in the background
                server = subprocess.Popen(
                    ["bash", "-c", f". {state}; exec {command[:-2]} --port 0 --no-access-log"], cwd=tmp_path, env=env,
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                servers.append(server)
                assert server.stderr is not None
                got = [server.stderr.readline().rstrip("\n")]
                found_address = re.search(r"http://(127\.0\.0\.1:\d+)/", got[0])
                assert found_address, got
                address = found_address[1]
                shown = [line.replace(SHOWN_ADDRESS, address) for line in shown]
            else:
                script = f"set -a; . {state}; {command}\nexport -p > {state}"
                run = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                                     timeout=120, check=False)
                got = (run.stdout + run.stderr).splitlines()
            assert matches(shown, got), f"$ {command}\n--- the README shows:\n" + "\n".join(shown) + \
                "\n--- it prints:\n" + "\n".join(got)
    finally:
        for server in servers:
            server.terminate()
            server.communicate(timeout=30)


# --- figures the docs give that the product can check ----------------------------------------------------------


def test_reliability_counts_the_bad_lines_the_corpus_has() -> None:
    [count] = re.findall(r"`fixtures/log_bad_input\.jsonl`: (\d+) bad lines",
                         (ROOT / "docs" / "RELIABILITY.md").read_text(encoding="utf-8"))
    replayed = run_cli("replay", "fixtures/log_bad_input.jsonl")
    expected = json.loads((ROOT / "fixtures" / "log_bad_input.expected.json").read_text(encoding="utf-8"))
    assert int(count) == len(json.loads(replayed.stdout)["bad_lines"]) == len(expected["bad_lines"])


def test_the_readme_gives_the_jobs_range_replay_takes() -> None:
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    [(low, high)] = re.findall(r"`tools/replay --jobs N LOG` folds the four domains in N processes \((\d+) to (\d+);",
                               readme)
    assert f"({low} to {high};" in " ".join(run_cli("replay", "--help").stdout.split())
    for n in range(int(low) - 1, int(high) + 2):
        done = run_cli("replay", "--jobs", str(n), "fixtures/handoffs_network_cut.jsonl")
        assert done.returncode == (0 if int(low) <= n <= int(high) else 2), (n, done.stderr)


def test_operations_names_every_field_a_rollback_loses() -> None:
    """A version from before a field the project adds ignores it (spec: unknown fields are kept and ignored), and
    the verdict it carries with it: a failed lanes pass read as "Nothing needs a person." after a rollback.
    docs/OPERATIONS.md, "Upgrading and rolling back", names each of them, with the commit that added it: a field
    added to PROJECT_FIELDS fails here until it is there."""
    text = (ROOT / "docs" / "OPERATIONS.md").read_text(encoding="utf-8")
    section = text[text.index("## 8. Upgrading and rolling back"):]
    named = set()
    for fields, _commit in re.findall(r"^\| (`[a-z_]+\.[a-z_]+`(?:, `\.[a-z_]+`)*) \| `([0-9a-f]{7,})` \(", section,
                                      re.M):
        first, *more = re.findall(r"`([^`]+)`", fields)
        wire_type, field = first.split(".")
        named |= {(wire_type, field), *((wire_type, name.lstrip(".")) for name in more)}
    assert named == {(cls.wire_type, field) for cls, fields in PROJECT_FIELDS.items() for field in fields}


def test_the_rollback_table_names_commits_of_this_history() -> None:
    """An operator checks a version with `git merge-base --is-ancestor COMMIT HEAD`: every commit the rollback
    table names must be one of main's (a branch rebased before it landed left two names of commits that were
    never merged, D2). Checked where the checkout has its whole history."""
    git = ["git", "-C", str(ROOT)]
    shallow = subprocess.run([*git, "rev-parse", "--is-shallow-repository"], capture_output=True, text=True,
                             check=False)
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("not a git checkout with its whole history")
    text = (ROOT / "docs" / "OPERATIONS.md").read_text(encoding="utf-8")
    section = text[text.index("## 8. Upgrading and rolling back"):]
    commits = re.findall(r"^\| `[a-z_]+\.[a-z_]+`[^|]*\| `([0-9a-f]{7,})` \(", section, re.M)
    assert commits
    strays = [c for c in commits
              if subprocess.run([*git, "merge-base", "--is-ancestor", c, "HEAD"], capture_output=True).returncode]
    assert strays == []


def test_serve_help_gives_the_age_of_an_answer_the_readme_gives() -> None:
    """R7: ``serve --help`` said a judgement is reused "for at most a second", but an answer as of now may be up to
    ``--tick`` old (README; a reviewer saw /v1/status 3 s behind): both give that bound."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "the newest is answered while the next is made (at most `--tick`, 5 s, old, plus the time one " \
        "judgement takes" in readme
    helped = " ".join(run_cli("serve", "--help").stdout.split())
    assert "at most a second" not in helped
    assert "an answer may be up to --tick old (5 s), plus the time one judgement takes" in helped


def test_a_new_log_started_as_operations_says_is_one_the_units_can_run_on(tmp_path: Path) -> None:
    """R10: docs/OPERATIONS.md's "To start a new log on purpose", typed as written, moved the log away and left
    none: the failback unit's pass then failed (exit 2, "no such log") every 15 minutes, and follow's
    recovery_log_missing 1 paged RecoveryLogMissing (critical) until something happened to append. The block,
    run here as the ledger user would (the systemctl lines are the test's own starts), leaves an empty log that
    the failback pass writes its heartbeat to and follow reads: nothing missing, nothing vanished."""
    text = (ROOT / "docs" / "OPERATIONS.md").read_text(encoding="utf-8")
    block = re.search(r"To start a new log on purpose.*?```sh\n(.*?)```", text, re.S)
    assert block is not None
    d = tmp_path / "var"
    d.mkdir()
    log = d / "ledger.jsonl"
    run_cli("append", str(log), stdin='{"type": "handoff_created", "handoff_id": "h1", "account": "a"}\n')
    (d / "follow.snap").write_text("old")
    script = "\n".join(line.replace("sudo -u ledger ", "") for line in block[1].splitlines()
                       if "systemctl" not in line).replace("d=/var/lib/recovery-ledger", f"d={d}")
    done = subprocess.run(["sh", "-ec", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert not (d / "follow.snap").exists() and len(list(d.glob("ledger.jsonl.2*"))) == 1  # the old one kept

    # what the units do once started: a failback pass (nothing pending), and follow with its snapshot
    passed = run_cli("failback", str(log), "--period", "15m", "--probe-cmd", "true", "--resume-cmd", "true")
    assert passed.returncode == 0, passed.stderr
    dump = tmp_path / "dump.json"
    follow = subprocess.Popen([sys.executable, "-m", "eventlog", "follow", str(log), "--dump", str(dump),
                               "--snapshot", str(d / "follow.snap"), "--tick", "1s"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):  # its first dump (written by a rename: whole or not there)
            if dump.exists() or follow.poll() is not None:
                break
            time.sleep(0.1)
        state = json.loads(dump.read_text())
    finally:
        follow.terminate()
        follow.wait(timeout=30)
    assert "log_missing" not in state and state.get("lines_vanished") is None and state["events"] == 1


def test_the_upgrade_block_reaches_a_version_newer_than_the_clone(tmp_path: Path) -> None:
    """R10: section 8's block went straight to ``git checkout VERSION``: in a checkout cloned before VERSION was
    made, that is "pathspec 'VERSION' did not match" and nothing is upgraded. Its git lines, run as written in a
    clone one commit behind (VERSION its origin's newest), reach VERSION; and the ancestry check the rollback table
    gives then answers for VERSION, 0 for each commit the table names."""
    git = ["git", "-c", "advice.detachedHead=false"]
    if subprocess.run([*git, "-C", str(ROOT), "rev-parse", "--is-shallow-repository"], capture_output=True,
                      text=True, check=False).stdout.strip() != "false":
        pytest.skip("not a git checkout with its whole history")
    origin, opt = tmp_path / "origin", tmp_path / "opt"
    subprocess.run([*git, "clone", "-q", "--no-local", str(ROOT), str(origin)], check=True)
    version = subprocess.run([*git, "-C", str(origin), "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()
    subprocess.run([*git, "-C", str(origin), "reset", "-q", "--hard", "HEAD~1"], check=True)
    subprocess.run([*git, "clone", "-q", "--no-local", str(origin), str(opt)], check=True)
    subprocess.run([*git, "-C", str(origin), "reset", "-q", "--hard", version], check=True)  # VERSION is made
    assert subprocess.run([*git, "-C", str(opt), "cat-file", "-e", version], capture_output=True).returncode != 0

    text = (ROOT / "docs" / "OPERATIONS.md").read_text(encoding="utf-8")
    section = text[text.index("## 8. Upgrading and rolling back"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    lines = [line.split("  #")[0].split(" && ")[0].removeprefix("sudo git ")  # tools/setup is not the test's
             for line in block[1].splitlines() if line.startswith("sudo git ")]
    assert lines and lines[-1].endswith("checkout VERSION")
    for line in lines:
        args = line.replace("/opt/recovery-ledger", str(opt)).replace("VERSION", version).split()
        done = subprocess.run([*git, *args], capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, (line, done.stderr)
    head = subprocess.run([*git, "-C", str(opt), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert head.stdout.strip() == version

    check = re.search(r"`sudo git -C /opt/recovery-ledger merge-base --is-ancestor COMMIT\s+VERSION`", section)
    assert check is not None
    commits = re.findall(r"^\| `[a-z_]+\.[a-z_]+`[^|]*\| `([0-9a-f]{7,})` \(", section, re.M)
    for commit in commits:
        known = subprocess.run([*git, "-C", str(opt), "merge-base", "--is-ancestor", commit, version],
                               capture_output=True, text=True, check=False)
        assert known.returncode == 0, (commit, known.stderr)

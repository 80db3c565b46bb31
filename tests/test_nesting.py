"""One nesting rule for every reader (spec section 1: what ``append`` writes a replay applies; no line a reader
accepts may make a view fail), and ``explain`` showing a line's values as written.

A line whose arrays and objects nest deeper than ``MAX_DEPTH`` (its own object being level 1) is the bad line
``bad_value: nested deeper than 64 levels`` for the appender, the replay, ``status``, ``explain``, ``sessions``,
``decide`` and the importers alike; every line within it is read the same by all of them. Before the rule each
decoder stopped where Python's recursion limit less its caller's stack left it: a little deeper or shallower in
each command, so one command applied a line that the next called ``not_json`` or never got to.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog.events import EVENT_TYPES
from eventlog.jetstream import export_line
from eventlog.reader import MAX_DEPTH, deeper_at
from eventlog.runners.failback import read_handshake
from tests.conftest import run_cli

TS = "2026-08-05T10:00:00+09:00"
TOO_DEEP = f"bad_value: nested deeper than {MAX_DEPTH} levels"
#: Depths of the unknown field ``x`` that make a line too deep: one past the rule, around where the decoders
#: used to stop (so each command judged it its own way), and far past it.
DEEPER = [MAX_DEPTH, 986, 988, 5000]


def nested(depth: int) -> str:
    """A JSON array ``depth`` levels deep."""
    return "[" * depth + "]" * depth


def line(event: dict[str, Any], depth: int) -> str:
    """``event`` as a line with an unknown field ``x`` nested ``depth`` deep: the line nests ``depth + 1``."""
    return json.dumps(event)[:-1] + f', "x": {nested(depth)}}}'


def created(hid: str) -> dict[str, Any]:
    return {"type": "handoff_created", "ts": TS, "handoff_id": hid, "account": "a"}


def dump(log: Path) -> dict[str, Any]:
    out = run_cli("replay", str(log))
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    return json.loads(out.stdout)


def json_of(*args: str, code: int = 0) -> Any:
    out = run_cli(*args)
    assert out.returncode == code and "Traceback" not in out.stderr, (args, out.returncode, out.stderr)
    return json.loads(out.stdout)


@pytest.mark.parametrize("depth", DEEPER)
def test_append_refuses_a_line_nested_too_deep_and_leaves_the_log_as_it_was(tmp_path: Path, depth: int) -> None:
    log = tmp_path / "v.jsonl"
    assert run_cli("append", str(log), stdin=json.dumps(created("h0")) + "\n").returncode == 0
    before = log.read_bytes()
    out = run_cli("append", str(log), stdin=line(created("h1"), depth) + "\n")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert f"stdin line 1: {TOO_DEEP} (at byte " in out.stderr
    assert log.read_bytes() == before
    array = run_cli("append", str(log), stdin=nested(depth + 1) + "\n")  # no object at all
    assert array.returncode == 2 and "not_object: line is an array" in array.stderr, array.stderr
    assert log.read_bytes() == before
    assert run_cli("append", str(log), stdin=json.dumps(created("h2")) + "\n").returncode == 0  # still a log


def test_a_line_as_deep_as_the_rule_allows_is_appended_and_read_alike_everywhere(tmp_path: Path) -> None:
    log = tmp_path / "v.jsonl"
    text = line(created("h1"), MAX_DEPTH - 1)  # MAX_DEPTH levels: the object and 63 arrays
    out = run_cli("append", str(log), stdin=text + "\n")
    assert out.returncode == 0, out.stderr
    got = dump(log)
    assert got["events"] == 1 and got["bad_lines"] == [] and "h1" in got["handoffs"]["items"]
    status = json_of("status", str(log), "--at", "log", "--json", code=1)  # 1: no watcher ran for h1
    assert all(group["domain"] != "log" for group in status["groups"]), status["groups"]
    explained = json_of("explain", str(log), "h1", "--at", "log", "--json")
    assert explained["lines"][0]["event"]["x"] == json.loads(nested(MAX_DEPTH - 1))


@pytest.mark.parametrize("depth", DEEPER)
def test_a_hand_written_line_nested_too_deep_is_the_same_bad_line_for_every_reader(tmp_path: Path,
                                                                                    depth: int) -> None:
    """A session stopped for a decision, then a line of it nested too deep: every reader leaves the line out,
    names it alike, and counts the same revision, so the decision ``status`` prints is accepted."""
    log = tmp_path / "s.jsonl"
    claimed = {"type": "worker_claimed", "ts": TS, "session_id": "s1", "generation": 1, "worker": "w-1",
               "restore": True}
    failed = {"type": "checkpoint_restore_failed", "ts": "2026-08-05T10:00:20+09:00", "session_id": "s1",
              "generation": 1, "reason": "incompatible_checkpoint"}
    storage = {"type": "storage_unavailable", "ts": "2026-08-05T10:00:30+09:00", "session_id": "s1",
               "generation": 1, "cause": "dns"}
    log.write_text("\n".join([json.dumps(claimed), json.dumps(failed), line(storage, depth), ""]))
    got = dump(log)
    assert got["events"] == 2
    [bad] = got["bad_lines"]
    assert bad["line"] == 3 and bad["reason"].startswith(TOO_DEEP + " (at byte "), bad
    assert got["sessions"]["items"]["s1"]["revision"] == 2

    status = json_of("status", str(log), "--at", "log", "--json", code=1)
    items = [item for group in status["groups"] for item in group["items"]]
    assert [i["reason"] for i in items if i["domain"] == "log"] == [bad["reason"]]
    [session] = [i for i in items if i["id"] == "s1"]
    assert "--expected-revision 2 " in session["next"]

    sessions = json_of("sessions", str(log), "--at", "log", "--json", code=1)
    assert sessions["items"]["s1"]["revision"] == 2
    explained = run_cli("explain", str(log), "s1", "--at", "log")
    assert explained.returncode == 0 and "Traceback" not in explained.stderr, explained.stderr
    assert f"line 3: {bad['reason']}" in explained.stderr

    args = shlex.split(session["next"].replace("<why>", "the runtime is fixed"))
    assert args[0] == "eventlog"
    decided = run_cli(*args[1:])
    assert decided.returncode == 0 and decided.stdout.startswith("accepted: retry_restore of s1"), decided.stderr
    assert dump(log)["sessions"]["items"]["s1"]["revision"] == 3
    appended = run_cli("append", str(log), stdin=json.dumps(created("h1")) + "\n")  # still a log
    assert appended.returncode == 0, appended.stderr


def test_a_file_of_lines_nested_too_deep_is_still_a_log_and_arrays_are_not(tmp_path: Path) -> None:
    """An object nested too deep is a bad event (the file is a log); an array is no JSON object (no log)."""
    objects, arrays = tmp_path / "objects.jsonl", tmp_path / "arrays.jsonl"
    objects.write_text(line(created("h1"), 5000) + "\n")
    arrays.write_text(nested(5000) + "\n")
    assert run_cli("append", str(objects), stdin=json.dumps(created("h2")) + "\n").returncode == 0
    refused = run_cli("append", str(arrays), stdin=json.dumps(created("h2")) + "\n")
    assert refused.returncode == 2 and "does not look like an event log" in refused.stderr, refused.stderr
    assert "not_object: line is an array" in refused.stderr


def test_a_hostile_line_is_measured_in_one_pass(tmp_path: Path) -> None:
    """A string never closed, full of escaped quotes, with brackets after it: read as a decoder reads it (the
    brackets are inside the string), in one pass (the first measure went back over it from every quote)."""
    log = tmp_path / "v.jsonl"
    log.write_bytes(b'{"type":"lane_check","ts":"' + TS.encode() + b'","x":"' + b'\\"' * 400_000 + b"[" * 70 + b"\n")
    out = run_cli("replay", str(log), timeout=60)
    assert out.returncode == 0, out.stderr
    [bad] = json.loads(out.stdout)["bad_lines"]
    assert bad["reason"].startswith("not_json: "), bad


def _nesting(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_nesting, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_nesting, value), default=0)
    return 0


_SCALARS = st.one_of(st.none(), st.integers(), st.sampled_from(['[{"', "]}\\", "\\", '"', "é[", ""]),
                     st.text(max_size=4))


@given(st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.sampled_from(["a", "[", '{"', "\\"]), inner, max_size=3), max_leaves=40),
       st.integers(1, 8), st.booleans())
@settings(max_examples=300, deadline=None)
def test_the_measure_is_exact_for_json(value: Any, limit: int, ascii_only: bool) -> None:
    raw = json.dumps({"x": value}, ensure_ascii=ascii_only).encode()
    at = deeper_at(raw, limit)
    assert (at is not None) == (_nesting({"x": value}) > limit)
    if at is not None:
        assert raw[at:at + 1] in (b"[", b"{")


def test_explain_shows_each_value_as_written(tmp_path: Path) -> None:
    log = tmp_path / "big.jsonl"
    huge = "1" + "0" * 309  # past a double: orjson called it infinity, and explain died
    text = '{"type":"handoff_created","handoff_id":"h2","account":"a","note":' + huge + ',"u":18446744073709551617}'
    appended = run_cli("append", str(log), stdin=text + "\n")
    assert appended.returncode == 0, appended.stderr
    by_hand = ('{"type":"claimed","ts":"2026-08-05T10:00:00+09:00","handoff_id":"h2","watcher":"w","attempt":1,'
               '"f":0.10000000000000000555,"g":1E308}')  # (1e400: bad_value, no reader holds it)
    with log.open("a") as f:
        f.write(by_hand + "\n")
    written = log.read_text().splitlines()
    assert dump(log)["events"] == 2

    out = run_cli("explain", str(log), "h2", "--at", "log")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert f"{log}:1: {written[0]}\n" in out.stdout and f"{log}:2: {by_hand}\n" in out.stdout
    assert "1.8446744073709552e+19" not in out.stdout

    as_json = run_cli("explain", str(log), "h2", "--at", "log", "--json")
    assert as_json.returncode == 0 and "Traceback" not in as_json.stderr, as_json.stderr
    assert f'"event":{written[0]}' in as_json.stdout and f'"event":{by_hand}' in as_json.stdout
    events = [x["event"] for x in json.loads(as_json.stdout)["lines"]]
    assert events[0]["note"] == int(huge) and events[0]["u"] == 18446744073709551617


def test_importers_name_input_nested_too_deep(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    worker = tmp_path / "worker.log"
    deep = {"msg": "worker.checkpoint.restore_unavailable", "ts": TS, "session_id": "s1", "generation": 1,
            "status": 503}
    worker.write_text(line(deep, 5000) + "\n" + line(deep, 100) + "\n")
    out = run_cli("import", "worker-log", str(log), str(worker), "--json")
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    skipped = json.loads(out.stdout)["skipped"]
    assert [s.split(": ", 1)[0] for s in skipped] == [f"{worker}:1", f"{worker}:2"]
    assert all(s.split(": ", 1)[1].startswith(TOO_DEEP) for s in skipped), skipped

    ledger = tmp_path / "ledger.json"
    ledger.write_text(f'[{{"account":"a","limitedAt":"{TS}","x":{nested(5000)}}}]')
    out = run_cli("import", "ledger", str(log), str(ledger))
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
    assert f"nested deeper than {MAX_DEPTH} levels" in out.stderr


def test_a_resume_answer_nested_too_deep_is_a_bad_handshake() -> None:
    answer = '{"branch":"b","head":"c","dirty":false,"todos":"taken_over","x":' + nested(5000) + "}"
    assert read_handshake("log line\n" + answer + "\n") == f"bad handshake: {TOO_DEEP}"


def test_export_keeps_a_message_as_written() -> None:
    head, rest = b'{"type":"lane_check","ts":"2026-08-05T10:00:00+09:00",', b'"f":0.10000000000000000555,"a":1,"a":2}'
    assert export_line(7, head + rest) == head + b'"seq":7,' + rest  # where the file appender puts seq
    other_order = b"{" + rest[:-1] + b"," + head[1:-1] + b"}"
    assert export_line(7, other_order) == other_order[:-1] + b',"seq":7}'  # else last
    deep = b'{"type":"lane_check","ts":"2026-08-05T10:00:00+09:00","x":' + nested(5000).encode() + b"}"
    assert export_line(7, deep) == deep


def _depth(info: msgspec.inspect.Type) -> int:
    """How deep a field of this type nests in JSON (a scalar 0); fails on a type that could nest at will."""
    assert not isinstance(info, (msgspec.inspect.AnyType, msgspec.inspect.RawType)), info
    if isinstance(info, msgspec.inspect.DictType):  # an object of typed values (lane_check's sending, unobserved)
        return 1 + _depth(info.value_type)
    if isinstance(info, msgspec.inspect.UnionType):
        return max(_depth(t) for t in info.types)
    if isinstance(info, (msgspec.inspect.ListType, msgspec.inspect.TupleType, msgspec.inspect.SetType)):
        inner = info.item_type if not isinstance(info, msgspec.inspect.TupleType) else info.item_types
        return 1 + (max(map(_depth, inner), default=0) if isinstance(inner, tuple) else _depth(inner))
    if isinstance(info, msgspec.inspect.StructType):
        return 1 + max((_depth(f.type) for f in info.fields), default=0)
    return 0


def test_only_unknown_fields_can_nest_deeper_than_the_event_types() -> None:
    """What the replay's fast path relies on (eventlog/reader.py, "Nesting"): a line with no unknown field holds
    exactly the '"' its event accounts for, and nests no deeper than its type, far within MAX_DEPTH."""
    depths = {name: _depth(msgspec.inspect.type_info(cls)) for name, cls in EVENT_TYPES.items()}
    assert max(depths.values()) == 3 < MAX_DEPTH, depths

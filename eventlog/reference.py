"""The event reference (docs/EVENTS.md), generated from the event types and the rules written here.

:func:`events_markdown` renders the page: for every domain, a table of its event
types built from the msgspec structs of :mod:`eventlog.events` (each type's
docstring, each field's type, whether it is required, its default), then the
domain's rules in plain words with the reason its seed gives. ``tools/gen-docs``
writes it; a test fails when the file in the repository differs (edit the
structs or the text below, then run ``tools/gen-docs``).
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect as mi

from eventlog.events import EVENT_TYPES, KEY_FIELDS, PROJECT_FIELDS, TIME_FIELDS, Event
from eventlog.reader import MAX_DEPTH

#: Where the page lives in the repository.
PATH = "docs/EVENTS.md"

#: Every domain: its title, its seed, its event types (in the order of eventlog/events.py), its rules.
DOMAINS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("Handoffs: failover to local, failback to the cloud", "seed 000", (
        "handoff_created", "local_started", "local_start_failed", "claimed", "released", "resume_requested",
        "resume_failed", "verified", "conflict", "needs_human", "skip", "limit_recorded", "probe_result",
        "watcher_run"), """\
**Why.** On 2026-07-25 there were 98 handoffs: 86 had started locally, none had come
back to the cloud (69 expired, 29 were skipped). Starting the local side and coming
back are different jobs, so they are counted apart: `failover` (handoffs with a
`local_started`) and `failback` (handoffs `returned`).

- **States**: `pending` → `claimed` → `resume_requested` → `returned`, and `needs_human`,
  `skipped`. `claimed` applies only to a `pending` handoff; `resume_requested` only to a
  `claimed` one; `verified` and `resume_failed` only to a `resume_requested` one;
  `conflict` to a `claimed` or `resume_requested` one. `released` (from `claimed`, or from
  `needs_human` when a person sends it back) and `resume_failed` with `effect: none` make
  it `pending` again; `resume_failed` with `effect: unknown`, `conflict` and `needs_human`
  make it `needs_human`; `skip` closes any handoff that is neither `returned` nor
  `skipped`. `local_started` and `local_start_failed` only count the failover side.
  *Seed:* the old watcher knew only "untouched", `.resumed` and `.skip`; it could not tell
  taken, requested and really resumed apart.
- **Only `verified` counts as returned.** *Seed:* a started process is an intermediate
  result; return means the handshake saw the handoff id, the branch, HEAD and the dirty
  tree, and took over (or found done) the remaining TODOs.
- **Rejected**: an event that does not fit (a second `claimed` of a live claim, any event
  of a handoff never created, a second `handoff_created`) leaves the state as it was and is
  listed with its reason; `eventlog append` refuses it. So two watchers never both win a claim.
- **Stale**: `claimed` or `resume_requested` with no further event of that handoff for
  longer than `stale_after`: the failback watcher's `--stale-after`, which its `watcher_run` carries
  as `stale_after_s` (so every view judges as the watcher does), else 30 min; `tools/replay
  --stale-after` overrides both. A stale `claimed` is `retryable` (no request went
  out: release it and try again); a stale `resume_requested` is `unknown_effect`: it goes to a
  person and is never retried on its own. *Seed:* after a request, something may have
  happened outside; the old `.resumed` marker, written before the start, blocked every retry instead.
- **A conflict goes to a person**, nothing edited. *Seed:* someone (a person, another agent)
  may have touched the repository while the work was local.
- **Nothing expires on a timer.** Work that did not come back is counted by why
  (`skip` reasons, `needs_human` reasons, still pending). *Seed:* a fixed 12 h expiry
  ended 69 handoffs before the limit was even lifted.
- **Probe plan** of an account as of T: no pending handoff → no probe (`nothing_pending`);
  the ledger's latest `reset_at` is after T → wait for it (`waiting_reset`); a backoff
  holds → wait (`backoff_transient`: 60 s doubling per transient or network error in a row,
  at most 1 h; `backoff_estimate`: an estimated or unknown reset passed and probes still say
  `quota_limited`, 30 min doubling, at most 24 h); otherwise probe now (`due`). *Seed:*
  probing with nothing to bring back does not speed anything up, it only adds requests
  while the limit holds; the limit's reset time is per account (a ledger), not per
  directory; an estimate that proves wrong widens the next wait.
- **Probes are small** (a `PING_OK` answer), never the original work, and classified:
  `ok`, `quota_limited`, `transient`, `auth_error`, `network_timeout`, `unexpected`. *Seed:*
  "PING_OK or not" could not tell "still limited" from "the login is broken".
- **Claim order**: earliest `deadline` first (none last), then higher `importance`, then
  fewer attempts, then older. At most 2 claims are live at once (`--max-inflight`): a rule
  for the plan, not for the log.
- **Watcher late**: the last `watcher_run` is older than twice its `period_s`, or there is
  none while handoffs are pending; each watcher name is judged the same way. *Seed:* a
  launchd job that stops writes nothing; the heartbeat is what lets another path notice."""),
    ("Lanes: finished work nobody picked up, quiet progress", "seed 001", (
        "status_updated", "job_finished", "repo_commit", "lane_stopped", "lane_started", "lane_check",
        "resume_enqueued"), """\
**Why.** On 2026-08-05 a repair job finished at 12:54 and its result was not picked up
for about 21 hours: the lane was fine, nobody noticed it was done. Watching the process
cannot see this (a finished job's process is gone, as it should be), so the verdict
looks at what moved: the job's finish, the repository's HEAD, the progress file's age.

- **The verdict** (seed 001's `evaluate`, with the same order, keys and wording): stopped
  on purpose → `stopped-on-purpose`; the last status says `idle` → `lane-idle`; a job
  finished at least 90 min ago with no commit after it → `job-unpicked`; the progress file
  older than 8 h → `status-quiet`; else `moving`. A `lane_check` yields one
  `impl-lane-watch/v1` record, printed byte for byte as the seed prints it (its Japanese
  `detail` included: that is the seed's record).
- **Two thresholds, two meanings.** *Seed:* 90 min is twice the measured pick-up time
  (20 to 40 min) of finished work; 8 h catches a stale progress file well before the old
  48 h warning. One is finished work not collected, the other progress not reported.
  The lanes runner's `--unpicked`/`--quiet` ride in the `lane_check` it appends (`unpicked_s`,
  `quiet_s`): that check's record is judged with them, and every view judges lanes by the last
  check that states them (so the screen shows the stalls the runner acts on), else 90 min and
  8 h; `tools/replay --unpicked`/`--quiet` override them for the records of checks that state none
  and for the verdict now.
- **A stop is not a stall.** *Seed:* a lane stopped on purpose, or idle, must never be sent
  a resume.
- **Detect, then act**: `eventlog lanes` enqueues one resume per stall and writes
  `resume_enqueued`; a stall (product, kind, the event that anchors it) is never enqueued
  twice. *Seed:* the first monitor only notified; the resume depended on someone carrying
  the message, and that gap was the 21 hours. Its `lane_check`, written before any send
  (no send when it cannot be written: nothing would record the resume), says how the pass
  stands (`exit`: `ok`, or `error` with a `detail`: a lane it could not observe, a log with
  no lane, new bad lines); a pass that ends in error after it (a resume it could not send or
  record, a stop signal) writes a second one, same `ts`, that says so. Every live view names
  a last pass that ended in error, as a watcher's, so a failed send is never silent; what
  concerns one lane (a lane it could not observe, a send cut short) once, in that lane's own
  item, the rest (`general`, its problems that belong to no lane) as the pass's.
- **A send cut short is never repeated on its own** (the rule of section 3 for an unknown
  effect). The first `lane_check` of a pass that sends names the resumes it is about to send
  (`sending`: product to kind, `exit: sending`); a `resume_enqueued`, or `unsent` in a later
  `lane_check` (the command failed or never started), closes each. One still open (the pass
  killed while it sent, the command over its timeout or stopped by a signal) may have gone
  out: no pass sends it again, and every view asks "did it arrive?" with the `eventlog append`
  line that records it and `eventlog lanes --resend PRODUCT`, which sends it again. A pass
  that says `sending` reads as `error` while one of its sends is open.
- **The noticer is watched too.** *Seed:* "壊れていたのは実装レーンではなく、「終わった」と気づく
  主体でした". The lanes pass's `lane_check` is its heartbeat, with the period it runs at
  (`period_s`, `--period`, 1 h): with lanes in the log (not all stopped on purpose), a last
  `lane_check` older than twice it, or none while lanes have been fed that long, is named by
  every live view (`lanes_late`) and paged. `eventlog lanes --observe DIR` observes each lane
  before it checks, so one timer does both and its heartbeat covers the observation too: an
  observer's own silence cannot be told from a quiet lane in the log.
- Live views judge every lane now (`lanes.now` in the dump), not only at logged checks."""),
    ("Quota catch-up: re-run today's skipped jobs", "seed 002", (
        "job_registered", "circuit_opened", "circuit_closed", "job_skipped", "job_ran", "catchup_kicked",
        "catchup_finished"), """\
**Why.** While the quota circuit is open, the guard skips its 15 jobs and leaves a
marker. When the circuit closes, launchd does nothing until each job's next slot: a 9:00
job skipped at 9:00 waits until 9:00 the next day, a whole day lost.

- **A candidate** as of T (in T's zone: days and hours by that zone's rules at each instant,
  a clock change included; see below) passes all three of the seed's conditions:
  1. **guarded**: the guard runs it. *Seed:* never kick an unrelated job.
  2. **its latest marker is a skip of today**, and no `catchup_kicked` since. *Seed:* an
     old skip re-run every day is a zombie; a skip followed by a run already succeeded.
  3. **a calendar slot of today has passed** (`calendar_slot_passed`, exactly as the seed
     writes it): an `interval_s` job never (it runs again by itself); an entry without
     `Hour` makes the job no candidate; one passed slot is enough, every entry is looked at
     (`Weekday` 0 and 7 are Sunday). *Seed:* judging by the first entry only was a bug that
     depended on the order of the slots.
- **T's zone** is a named zone when one fits T: `--assume-tz`'s, else, for live commands, the
  machine's (`TZ`), when its offset at T is T's own; else T's fixed offset (a UTC `--at` judges
  the UTC day); a live command's now is taken in `--assume-tz`'s zone when it is given. So one
  instant gives one answer however T is written: a skip at 00:30 CEST is
  today's at 10:00 CET, the morning the clock went back. A replay (`tools/replay`) judges the
  same on every machine: only `--assume-tz` names its zone. A slot in the hour that comes twice
  has passed from its first showing on; one in the skipped hour once the clock has jumped past it.
- **No candidates, no probe**; a dry run never probes. *Seed:* probing on a day with
  nothing to re-run would call the model 48 times a day and eat the very quota the guard
  protects.
- **While the circuit is open** (T before `open_until`, no `circuit_closed` since) nothing is
  kicked.
- **One at a time**, each re-run bounded by a timeout (45 min) and killed when it passes it:
  SIGTERM, then SIGKILL after 30 s, before the next starts. *Seed:* 1200 s cut jobs that
  take over 20 minutes; and only stopping to wait let old jobs run on beside new ones (load
  over 40): stopping waiting is not stopping the job.
- **A re-run that did not end well is named until the job runs again** (the project's rule):
  one killed at its timeout, or `exited` with an exit other than 0 or none, and a
  `catchup_kicked` with no `catchup_finished` once its timeout, twice its kill grace and 5 min
  have passed (the catch-up runner writes its `--timeout` and `--kill-grace` on the kick as
  `timeout_s` and `kill_grace_s`; without them the spec's 2700 s and 30 s). What ends it: a
  later `job_skipped`, a `catchup_finished` `exited` 0, or a `job_ran` that is not the re-run's
  own failing marker (exit other than 0, dated from the kick to its end). *Seed:* catch-up exists
  so that a quota outage does not silently eat a day of runs; a re-run that failed, timed out
  or lost its runner eats it all the same. While a re-run may still run, no catch-up kicks
  another (one at a time)."""),
    ("Sessions: restore, startup and unknown outcomes", "seed 004", (
        "worker_claimed", "worker_ready", "checkpoint_restore_failed", "startup_failed", "storage_unavailable",
        "worker_stopped", "turn_started", "turn_finished", "checkpoint_committed", "execution_gone",
        "recovery_decision", "interrupt_stage", "control_result"), """\
**Why.** A session stops in three ways: its checkpoint does not restore, its worker ends
before it asks for input, or an interrupted turn ends with its outcome unknown. The
runbook's rule: find the cause and what happened outside first, then apply one explicit
decision.

- **Counted failures**: `checkpoint_restore_failed` and `startup_failed` add one to
  `failures`; after the 1st the session waits 30 s, after the 2nd 60 s (`backoff`, with
  `retry_at`), on the 3rd it stops: `recovery_required`, no new generation. `attention` says
  which (`RESTORE_FAILED`, `STARTUP_FAILED`). `incompatible_checkpoint` stops at once
  (failures 1). *Seed:* the same runtime and profile can never restore it; retrying only
  wastes time.
- **Not failures**: `storage_unavailable` (connect, DNS, timeout, HTTP 408/429/5xx) and
  `worker_stopped` (drain, pause, terminate, close, revoked, failed). *Seed:* the worker
  retries storage itself (1 s doubling up to 30 s); a worker stopped on purpose did not fail.
  `worker_ready` resets `failures`, `retry_at` and `attention`, and admits the session.
- **An unknown outcome is never re-run on its own**: `turn_finished` with `outcome_unknown`
  makes the session `recovery_required` (attention `RECOVERY_REQUIRED`) and the turn joins
  `unknown_turns`. *Seed:* storage coming back only lets the next worker read the
  checkpoint; it cannot tell what the turn's tools already did outside (writes, pushes,
  calls cannot be undone).
- **A waiting session admits no new work**: while it is `recovery_required`, in `backoff`
  before `retry_at`, `stopped` with a context gap, or `closed`, a new generation's claim, a
  ready worker and a started turn are rejected. *Seed:* queued input is not dispatched.
- **Decisions** (`recovery_decision`, each with a receipt, refusals kept in the log as the
  audit trail), checked in this order: the same `idempotency_key` with the same request
  gets its first receipt back (nothing changes), with another request
  `IDEMPOTENCY_KEY_REUSED`; `expected_revision` must be the session's revision
  (`REQUEST_STALE`); `retry_restore` only when stopped by restore failures; `start_fresh`
  when stopped by restore or startup failures, or stopped with a context gap; `abandon` and
  `confirm_completed` name an unknown turn and need `execution_gone` after it (else
  `RECOVERY_REQUIRED`: the previous execution has not been confirmed gone);
  `confirm_completed` also needs `evidence_ref` and a checkpoint covering the turn (else
  `CHECKPOINT_UNAVAILABLE`); `close` is accepted unless already closed, and cannot be undone.
- **After abandon or confirm_completed** the session is `stopped`; it is `resumable` when a
  checkpoint covers every turn it ran, otherwise attention `CONTEXT_GAP`: `start_fresh`
  (without that context) or `close`.
- **The interrupt timeline**: each control's stages in the worker's order
  (`control_received` → `sdk_interrupt_called` → `sdk_interrupt_answered` →
  `engine_terminal` → `capture_started` → `capture_finished` → `finalize_started` →
  `finalize_finished`), the engine's 5 s grace and the 30 s capture budget, a late SDK
  answer, and one verdict per control (`engine_timeout`, `capture_timeout`,
  `capture_failed`, `checkpoint_unavailable`, `deadline_exceeded`, `unexplained`,
  `late_sdk`, `clean`). These two event types are the project's, read from the worker's log."""),
)

HEAD = """\
# Events

<!-- Generated by tools/gen-docs from eventlog/events.py and eventlog/reference.py: edit those, then run
     tools/gen-docs. tests/test_docs.py fails when this file is stale. -->

Every transition is one line of a log: one JSON object, UTF-8, ended by `\\n`. This page
is the reference of every event type (built from the msgspec structs the reader decodes
with, so it is the schema's own word; `eventlog schema` prints the same as JSON Schema)
and the rules the projections apply to them, each with the reason its seed gives. The
seeds are four field reports of automated work that stopped without a sound: 000 handoff
failback, 001 stall detection, 002 quota catch-up, 004 session recovery.

## 1. Lines

- A last line without `\\n` is not committed yet: a follower waits for it, a replay leaves
  it out and reports `torn_tail`.
- A line that is not a JSON object, has an unknown `type`, lacks a required field or has
  a field of the wrong type or value is **bad input**: a replay names it (line number and a
  reason that starts with a stable code) and goes on; `eventlog append` refuses it. Nothing
  is dropped without being counted.
- Unknown extra fields are kept and ignored (a newer writer's fields do not break a reader). So
  is a field the project adds to a type of the contract (*project's* below) when it holds a
  value of another type or range than the project writes: another writer may use the name for
  something else, and its line is still applied ([DECISIONS.md](DECISIONS.md), "Fields the project adds").
- **Ranges**: a time lies in the years 1900 to 9000; an integer fits in a signed 64 bit
  (`seq` below 2^63); a key given twice is `bad_value`, and so is a line whose arrays and
  objects nest deeper than {max_depth} levels (its own object is level 1): `bad_value: nested
  deeper than {max_depth} levels`, for the appender and every reader alike, and a number no
  reader can hold, in an unknown field too (`1e400`, an integer of more than 4300 digits):
  `bad_value: a number out of range`. A time computed
  from an accepted one (a backoff, a retry) past what can be written counts as "never" (`null`).
- What `eventlog append` writes is what a replay applies: the appender reads every line back
  with the replay's own reader before writing it.

## 2. The envelope (every event)

| field | type | rule |
|---|---|---|
| `type` | string | one of the types below |
| `ts` | time | ISO 8601 **with** a UTC offset (`2026-08-03T01:20:00+09:00`); without one it is bad input unless the reader is given `--assume-tz ZONE` |
| `seq` | int ≥ 1, optional | set by the appender, strictly increasing; a hand-written line may leave it out (its line number stands in); `null` is a wrong type (`wrong_type: seq`), not a `seq` left out |
| `v` | int, default 1 | the event's schema version; older versions are upcast on read |
| `batch_end` | int ≥ 1, optional | set by the appender on each line of a batch: the `seq` of its last line (readers apply a batch whole or not at all) |

The order of lines is the order of transitions; `ts` is the writer's clock, used for
durations and for "as of" judgments, and may run backwards between writers.
Each event belongs to one **stream**, named by its first key field among
{key_fields} (`lane_check`, `watcher_run` and the circuit events belong to none). A
stream's **revision** is the number of its events applied so far: `eventlog append
--expect-revision N` and a recovery decision's `expected_revision` check it.

**As of T**: the state after every line, judged at time T. A replay's T is the `ts` of
the log's last applied or rejected line (its last event: not the largest `ts`, and a bad
line does not count); live commands judge now (`--at TIME`, `--at log`). Times are
printed in the offset they were written with.

In the tables, a field marked *optional* may be left out (its default in brackets);
`time` is an ISO 8601 string with an offset.
"""


def _type(t: Any, time: bool = False) -> str:
    """A field's type in words."""
    if isinstance(t, mi.UnionType):
        kinds = [x for x in t.types if not isinstance(x, mi.NoneType)]
        words = " or ".join(_type(x, time) for x in kinds)
        return f"{words} or null" if len(kinds) < len(t.types) else words
    if isinstance(t, mi.StrType):
        if time:
            return "time"
        return "string, not empty" if t.min_length else "string"
    if isinstance(t, mi.IntType):
        if t.ge == 1:
            return "int ≥ 1"
        if t.ge == 0:
            return "int ≥ 0"
        return "int"
    if isinstance(t, mi.FloatType):
        return "number > 0" if t.gt == 0 else "number ≥ 0" if t.ge == 0 else "number"
    if isinstance(t, mi.BoolType):
        return "bool"
    if isinstance(t, mi.LiteralType):
        return " \\| ".join(f"`{v}`" for v in t.values)
    if isinstance(t, mi.ListType):
        return f"list of {_type(t.item_type)}"
    if isinstance(t, mi.DictType):
        return f"object of {_type(t.key_type)} to {_type(t.value_type)}"
    if isinstance(t, mi.StructType):
        keys = ", ".join(f"`{f.encode_name}`" for f in t.fields)
        return f"object ({keys}; each an int, optional)"
    raise TypeError(f"no words for the type {t!r}")


_ENVELOPE = frozenset({"type", "ts", "seq", "v", "batch_end"})


def _fields(cls: type[Event]) -> str:
    """The fields of one event type (the envelope's left out), one per line of a table cell."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    times = set(TIME_FIELDS.get(cls, ()))
    ours = set(PROJECT_FIELDS.get(cls, ()))
    out = []
    for f in info.fields:
        if f.encode_name in _ENVELOPE:
            continue
        word = _type(f.type, f.name in times)
        if not f.required:
            default = "" if f.default is None or f.default is msgspec.NODEFAULT else f" [{f.default}]"
            word += f", optional{default}"
        if f.name in ours:
            word += ", *project's* (another value: ignored)"
        out.append(f"`{f.encode_name}`: {word}")
    return "<br>".join(out) or "none"


def _table(types: tuple[str, ...]) -> str:
    rows = ["| type | fields | meaning |", "|---|---|---|"]
    for name in types:
        cls = EVENT_TYPES[name]
        doc = " ".join((inspect.getdoc(cls) or "").split()).replace("``", "`")
        rows.append(f"| `{name}` | {_fields(cls)} | {doc} |")
    return "\n".join(rows)


def events_markdown() -> str:
    """The whole of docs/EVENTS.md. ValueError when an event type belongs to no domain, or to two."""
    listed = [name for _, _, types, _ in DOMAINS for name in types]
    if sorted(listed) != sorted(EVENT_TYPES):
        missing = set(EVENT_TYPES) - set(listed)
        raise ValueError("every event type must be in exactly one domain of eventlog/reference.py: "
                         f"{missing or listed}")
    parts = [HEAD.replace("{key_fields}", ", ".join(f"`{k}`" for k in KEY_FIELDS))
             .replace("{max_depth}", str(MAX_DEPTH))]
    for n, (title, seed, types, rules) in enumerate(DOMAINS, 3):
        parts.append(f"## {n}. {title} ({seed})\n\n{_table(types)}\n\n{rules}\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    """``tools/gen-docs [--check]``: write docs/EVENTS.md, or (``--check``) exit 1 when it differs."""
    args = sys.argv[1:] if argv is None else argv
    path = Path(__file__).resolve().parent.parent / PATH
    text = events_markdown()
    if args == ["--check"]:
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            print(f"{PATH} is stale: run tools/gen-docs", file=sys.stderr)
            return 1
        return 0
    if args:
        print("usage: tools/gen-docs [--check]", file=sys.stderr)
        return 2
    path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["DOMAINS", "PATH", "events_markdown", "main"]

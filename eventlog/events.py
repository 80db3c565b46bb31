"""Event types of the log contract (spec/EVENTS.md, version 1).

One ``msgspec.Struct`` per event type; the tagged union on ``type`` is the
schema. Times stay the strings the writer wrote (they are printed back as
written); the reader checks them and :func:`parse_time` reads them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timezone, tzinfo
from operator import attrgetter
from typing import Annotated, Any, ClassVar, Final, Literal, Union

import msgspec

#: The ranges of the contract (spec section 1, "Ranges"): an integer field fits in a signed 64-bit integer,
#: ``seq`` (a Positive) stays below 2**63, and a time lies in the years 1900 to 9000.
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
FIRST_YEAR = 1900
LAST_YEAR = 9000

Int64 = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]
Positive = Annotated[int, msgspec.Meta(ge=1, le=INT64_MAX)]
NonNegative = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class Event(msgspec.Struct, tag_field="type", kw_only=True, gc=False):
    """The envelope every event carries.

    ``gc=False``: events hold only strings, numbers and (calendar) lists of
    plain structs, never a cycle, so the collector need not track them; a
    replay decodes a million of them and this saves about a tenth of decoding.
    """

    ts: str
    #: Left out (``UNSET``) on a hand-written line, where the line number stands in (spec section 2); ``null``
    #: is a wrong type, as for any integer field.
    seq: Positive | msgspec.UnsetType = msgspec.UNSET
    v: Int64 = 1
    #: Set by the appender on every line of a batch of several events: the ``seq`` of the batch's last line.
    #: A reader applies the batch only once that line is there (all or nothing; docs/RELIABILITY.md).
    batch_end: Positive | None = None
    #: The wire ``type`` (the tag), as a plain class attribute: reading ``__struct_config__`` builds an object
    #: each time, and the sessions fold reads it for every event it applies.
    wire_type: ClassVar[str]


#: The envelope's bookkeeping, set by writers and the appender: never part of what an event says.
ENVELOPE_FIELDS: frozenset[str] = frozenset({"ts", "seq", "v", "batch_end"})


# --- handoffs (seed 000) -----------------------------------------------------


class HandoffCreated(Event, tag="handoff_created"):
    """Cloud work was handed off to a local machine: failover began."""

    handoff_id: str
    account: str
    deadline: str | None = None
    importance: Int64 = 0
    repo: str | None = None
    branch: str | None = None
    head: str | None = None


class LocalStarted(Event, tag="local_started"):
    """A local session picked the handoff up: failover reached."""

    handoff_id: str


class LocalStartFailed(Event, tag="local_start_failed"):
    """The local session did not start."""

    handoff_id: str
    error: str


class Claimed(Event, tag="claimed"):
    """A watcher took the handoff to bring it back to the cloud (failback)."""

    handoff_id: str
    watcher: str
    attempt: Positive


class Released(Event, tag="released"):
    """A claim given back before any resume request, or a person sending a handoff back: pending again."""

    handoff_id: str
    reason: str
    #: Who wrote it by hand (``eventlog handoff release|requeue``); optional, the runner's own release of a stale
    #: claim has none. A person's release starts the failures in a row again (``resume_failing``).
    actor: str | None = None


class ResumeRequested(Event, tag="resume_requested"):
    """The cloud side was asked to resume (written before the request goes out)."""

    handoff_id: str
    attempt: Positive


class ResumeFailed(Event, tag="resume_failed"):
    """It did not resume; ``effect: unknown`` means something may have happened outside."""

    handoff_id: str
    attempt: Positive
    error: str
    effect: Literal["none", "unknown"]
    #: Who wrote it by hand (``eventlog handoff requeue`` of a request: a person vouches nothing happened
    #: outside); optional. A person's requeue starts the failures in a row again (``resume_failing``).
    actor: str | None = None


class Verified(Event, tag="verified"):
    """The handshake finished (branch, HEAD, dirty tree, TODOs). Only this counts as returned."""

    handoff_id: str
    attempt: Positive
    branch: str
    head: str
    dirty: bool
    todos: Literal["taken_over", "already_done"]


class Conflict(Event, tag="conflict"):
    """The handshake found the tree changed by someone else; nothing was edited."""

    handoff_id: str
    detail: str
    #: The project's addition (docs/DECISIONS.md, attempt fencing): the claim's attempt it answers. Without it,
    #: the conflict answers whatever claim is live (spec section 3 as written).
    attempt: Positive | None = None


class NeedsHuman(Event, tag="needs_human"):
    """Handed to a person, with the reason."""

    handoff_id: str
    reason: str


class Skip(Event, tag="skip"):
    """Closed without returning, with its reason."""

    handoff_id: str
    reason: NonEmpty


Confidence = Literal["explicit", "estimated", "unknown"]
ProbeOutcome = Literal["ok", "quota_limited", "transient", "auth_error", "network_timeout", "unexpected"]
PROBE_OUTCOMES: tuple[str, ...] = ProbeOutcome.__args__  # type: ignore[attr-defined]


class LimitRecorded(Event, tag="limit_recorded"):
    """The account's limit ledger: when it was limited, when it resets, how sure that is."""

    account: str
    limited_at: str
    reset_at: str | None
    source: str
    confidence: Confidence


class ProbeResult(Event, tag="probe_result"):
    """A small probe of the account (never the original work), classified."""

    account: str
    outcome: ProbeOutcome
    status: Int64 | None = None
    detail: str | None = None


class WatcherRun(Event, tag="watcher_run"):
    """The watcher's heartbeat, one per pass."""

    watcher: str
    exit: Literal["ok", "error"]
    period_s: Positive
    #: Why a pass ended in ``error`` (the failback runner writes it then); optional.
    detail: str | None = None
    #: The stale-claim age the pass judged with (``--stale-after``, 0 or more, as the flag takes it; the failback
    #: runner writes it): every view judges stale claims by the last heartbeat that states one, so it agrees
    #: with the watcher.
    stale_after_s: Annotated[float, msgspec.Meta(ge=0)] | None = None
    #: A person retired this watcher for good (``eventlog failback LOG --retire NAME``): its final heartbeat;
    #: optional. The views stop judging it late until a pass of that name runs again; the dump is the spec's.
    retired: bool = False


# --- lanes (seed 001) --------------------------------------------------------


class StatusUpdated(Event, tag="status_updated"):
    """The lane's progress file was written at ``ts``."""

    product: str
    state: Literal["running", "idle"]


class JobFinished(Event, tag="job_finished"):
    """A job of the lane finished at ``ts``."""

    product: str
    job_id: str | None = None


class RepoCommit(Event, tag="repo_commit"):
    """The product repository moved at ``ts`` (the finished work was picked up)."""

    product: str
    head: str


class LaneStopped(Event, tag="lane_stopped"):
    """The lane was stopped on purpose (the stop file)."""

    product: str


class LaneStarted(Event, tag="lane_started"):
    """The stop was lifted."""

    product: str


class LaneCheck(Event, tag="lane_check"):
    """A check ran at ``ts``; it yields one ``impl-lane-watch/v1`` record."""

    #: The thresholds the check judged with (``--unpicked``, ``--quiet``, more than 0, as the flags take them;
    #: the lanes runner writes both): that check's record is judged with them, and every view judges lanes by
    #: the last check that states them.
    unpicked_s: Annotated[float, msgspec.Meta(gt=0)] | None = None
    quiet_s: Annotated[float, msgspec.Meta(gt=0)] | None = None
    #: How the lanes runner's pass stands (it writes its check before its sends, and a second one after them when
    #: one failed); optional: ``error`` when it could not do all of its own work (a resume it could not send or
    #: record, new bad lines, no lane at all, a stop signal), then with a ``detail``. The views name a last pass
    #: that ended in error, as a watcher's.
    #: ``sending``: written before its sends (``sending`` names them), and no line since says the pass ended:
    #: until a ``resume_enqueued`` covers each, the pass reads as stopped while sending (project's rule for unknown
    #: effects; docs/DECISIONS.md, "A send cut short").
    exit: Literal["ok", "error", "sending"] | None = None
    detail: str | None = None
    #: The resumes the pass is about to send (product -> kind), written before the first one: one that no
    #: ``resume_enqueued`` and no ``unsent`` of a later ``lane_check`` closes has an unknown outcome, and no pass
    #: sends it again on its own (``eventlog lanes --resend PRODUCT``, once a person knows it did not arrive).
    sending: dict[str, str] | None = None
    #: The resumes of its pass that were not sent (the command failed or never started): the next pass sends them.
    unsent: dict[str, str] | None = None
    #: The sends still open whose outcome is unknown (product -> kind), an earlier pass's or, in a pass's closing
    #: line, its own: not sent by this pass, restated so that every view reads them from its last pass until a
    #: ``resume_enqueued`` closes them (a person's answer clears them at once).
    unsure: dict[str, str] | None = None
    #: What bounds its sends (``--timeout``, more than 0, and the kill grace after it; written with ``sending``):
    #: the views read the pass as under way, not cut short, until each send's time is up (docs/DECISIONS.md,
    #: "A send cut short").
    timeout_s: Annotated[float, msgspec.Meta(gt=0)] | None = None
    kill_grace_s: Annotated[float, msgspec.Meta(ge=0)] | None = None
    #: How often the lanes runner runs (``--period``, more than 0; it writes it): the views name a lanes pass
    #: late when no ``lane_check`` came for twice the last one stated (1 h when none did).
    period_s: Annotated[float, msgspec.Meta(gt=0)] | None = None
    #: What the lanes runner's pass (``--observe DIR``) could not observe, and why: each lane by its product (a
    #: lane the log knows, not stopped, with no ``NAME.env`` in DIR; one whose observation had a problem), or a
    #: file of DIR that could not be used by its path. The views name each until a later pass that observed states
    #: otherwise (an observing pass writes it, empty when it observed all; a pass without ``--observe`` does not).
    unobserved: dict[str, str] | None = None
    #: The problems of ``detail`` that no lane's own item carries (a send that failed, new bad lines, no lane at
    #: all, a stop signal, a resume not recorded), each cut as ``detail`` is: what the views name as the pass's
    #: error (``lanes_error``). A lane it could not observe (``unobserved``) and a send cut short (``unsure``) are
    #: their lane's own. Written with ``detail`` (empty: each of its problems is a lane's); a line without it (an
    #: older runner) is read as all of ``detail`` belonging to no lane.
    general: list[str] | None = None


class ResumeEnqueued(Event, tag="resume_enqueued"):
    """A resume task was sent for a stall of the lane."""

    product: str
    kind: str
    task_branch: str | None = None


# --- quota catch-up (seed 002) -------------------------------------------------


class CalendarEntry(msgspec.Struct, kw_only=True):
    """One ``StartCalendarInterval`` entry, keys as launchd writes them."""

    hour: Int64 | None = msgspec.field(default=None, name="Hour")
    minute: Int64 | None = msgspec.field(default=None, name="Minute")
    weekday: Int64 | None = msgspec.field(default=None, name="Weekday")
    day: Int64 | None = msgspec.field(default=None, name="Day")
    month: Int64 | None = msgspec.field(default=None, name="Month")


class JobRegistered(Event, tag="job_registered"):
    """A scheduled launchd job and its slots (``StartCalendarInterval`` or ``StartInterval``)."""

    label: str
    guarded: bool
    calendar: list[CalendarEntry] | None
    interval_s: Int64 | None


class CircuitOpened(Event, tag="circuit_opened"):
    """The quota circuit opened: guarded jobs are skipped until ``open_until``."""

    reason: str
    open_until: str


class CircuitClosed(Event, tag="circuit_closed"):
    """The quota circuit closed."""


class JobSkipped(Event, tag="job_skipped"):
    """The quota guard skipped a run (the ``CLAUDE_QUOTA_JOB_SKIPPED`` marker)."""

    label: str
    reason: str
    remaining_s: Int64 | float


class JobRan(Event, tag="job_ran"):
    """The quota guard ran the job (the ``CLAUDE_QUOTA_JOB_RAN`` marker)."""

    label: str
    exit: Int64


#: How a catch-up re-run was kicked (``catchup_kicked.kicked_by``): the runner's ``--scheduler`` or ``--kick-cmd``.
KickedBy = Literal["launchd", "systemd", "systemd_user", "kick_cmd"]
#: A launchd domain target as ``launchctl`` takes it (launchctl(1)): ``system``, or ``gui|user|login|pid/NUMBER``.
LAUNCHD_DOMAIN: Final = r"^(system|(gui|user|login|pid)/[0-9]+)$"


class CatchupKicked(Event, tag="catchup_kicked"):
    """Catch-up started a re-run of the job."""

    label: str
    #: The project's addition (the catch-up runner writes both; docs/DECISIONS.md, "A re-run that did not end
    #: well"): the re-run's ``--timeout`` and ``--kill-grace``, which bound when its end must be written. Without
    #: them, the spec's 2700 s and 30 s.
    timeout_s: Annotated[float, msgspec.Meta(gt=0)] | None = None
    kill_grace_s: Annotated[float, msgspec.Meta(ge=0)] | None = None
    #: The project's too: how the runner kicked it (``--scheduler launchd``, ``systemd``, ``systemd --systemd-user``
    #: or ``--kick-cmd``), so a view offers the command that runs or checks the job where it runs. A name from a
    #: closed set, never a command: a view prints no command taken from a log. Without it: not known (no OS command).
    kicked_by: KickedBy | None = None
    #: With ``kicked_by`` ``launchd``: the ``--launchd-domain`` given (``system``, ``gui/UID``, ...); without it,
    #: the runner's own ``gui/UID``, which a view writes ``gui/$(id -u)``.
    launchd_domain: Annotated[str, msgspec.Meta(pattern=LAUNCHD_DOMAIN)] | None = None


class CatchupFinished(Event, tag="catchup_finished"):
    """That re-run ended: exited, or killed at its timeout."""

    label: str
    outcome: Literal["exited", "timeout_killed"]
    exit: Int64 | None = None


# --- sessions (seed 004) -------------------------------------------------------


class WorkerClaimed(Event, tag="worker_claimed"):
    """A worker took the session (one generation)."""

    session_id: str
    generation: Int64
    worker: str
    restore: bool


class WorkerReady(Event, tag="worker_ready"):
    """The worker reported ready."""

    session_id: str
    generation: Int64


class CheckpointRestoreFailed(Event, tag="checkpoint_restore_failed"):
    """Restoring the checkpoint failed: a counted failure."""

    session_id: str
    generation: Int64
    reason: str


class StartupFailed(Event, tag="startup_failed"):
    """The worker ended before it asked for input: a counted failure."""

    session_id: str
    generation: Int64
    reason: str


class StorageUnavailable(Event, tag="storage_unavailable"):
    """A transient storage error: never a failure."""

    session_id: str
    generation: Int64
    cause: Literal["connect", "dns", "timeout", "http_408", "http_429", "http_5xx"]


class WorkerStopped(Event, tag="worker_stopped"):
    """The worker ended; informational, never counted."""

    session_id: str
    generation: Int64
    stop_kind: Literal["drain", "pause", "terminate", "close", "revoked", "failed"]


class TurnStarted(Event, tag="turn_started"):
    """A turn started (its place in the turn order)."""

    session_id: str
    turn_id: str


class TurnFinished(Event, tag="turn_finished"):
    """A turn ended; ``outcome_unknown`` stops the session for a person."""

    session_id: str
    turn_id: str
    outcome: Literal["completed", "interrupted", "outcome_unknown"]
    terminal_reason: str | None = None


class CheckpointCommitted(Event, tag="checkpoint_committed"):
    """A checkpoint covering every turn up to ``covers_turn``."""

    session_id: str
    covers_turn: str


class ExecutionGone(Event, tag="execution_gone"):
    """The scheduler confirmed that no execution of the session is left."""

    session_id: str


Decision = Literal["retry_restore", "start_fresh", "close", "abandon", "confirm_completed"]


class RecoveryDecision(Event, tag="recovery_decision"):
    """An operator's recovery decision; it yields a receipt."""

    session_id: str
    decision: Decision
    expected_revision: Int64
    idempotency_key: str
    reason: str
    target_turn_id: str | None = None
    evidence_ref: str | None = None
    #: Who sent it: the OS user (``eventlog decide``) or the API key's name.
    actor: str | None = None


# --- the interrupt timeline (seed 004, section 3; project events: docs/DECISIONS.md) -------

StageName = Literal[
    "control_received", "sdk_interrupt_called", "sdk_interrupt_answered", "engine_terminal",
    "capture_started", "capture_finished", "finalize_started", "finalize_finished",
    "late_sdk_interrupt_answered",
]
#: The stages of an interrupt in their normal order (``worker.turn.interrupt.stage``).
INTERRUPT_STAGES: tuple[str, ...] = StageName.__args__[:-1]  # type: ignore[attr-defined]
#: The SDK's answer after the engine's terminal: recorded apart, never inserted in the normal order.
LATE_SDK: Final = "late_sdk_interrupt_answered"


class InterruptStage(Event, tag="interrupt_stage"):
    """One stage of an interrupted turn, ``elapsed_ms`` after the interrupt was received."""

    session_id: str
    turn_id: str
    control_id: NonEmpty
    stage: StageName
    elapsed_ms: NonNegative
    outcome: NonEmpty | None = None
    reason_code: NonEmpty | None = None
    budget_ms: NonNegative | None = None


class ControlResult(Event, tag="control_result"):
    """A control's result (``control.result``): the turn's final outcome and the effect time."""

    session_id: str
    control_id: NonEmpty
    operation: NonEmpty
    outcome: NonEmpty
    turn_id: str | None = None
    reason_code: NonEmpty | None = None
    #: From the durable acceptance to the turn's terminal (0: a no-op on a finished turn); none when unknown.
    effect_ms: NonNegative | None = None


# --- the union -----------------------------------------------------------------

AnyEvent = Union[  # noqa: UP007 - msgspec needs a real Union object here
    HandoffCreated, LocalStarted, LocalStartFailed, Claimed, Released, ResumeRequested,
    ResumeFailed, Verified, Conflict, NeedsHuman, Skip, LimitRecorded, ProbeResult, WatcherRun,
    StatusUpdated, JobFinished, RepoCommit, LaneStopped, LaneStarted, LaneCheck, ResumeEnqueued,
    JobRegistered, CircuitOpened, CircuitClosed, JobSkipped, JobRan, CatchupKicked, CatchupFinished,
    WorkerClaimed, WorkerReady, CheckpointRestoreFailed, StartupFailed, StorageUnavailable,
    WorkerStopped, TurnStarted, TurnFinished, CheckpointCommitted, ExecutionGone, RecoveryDecision,
    InterruptStage, ControlResult,
]

EVENT_TYPES: dict[str, type[Event]] = {
    cls.__struct_config__.tag: cls
    for cls in AnyEvent.__args__  # type: ignore[attr-defined]
}
for _tag, _cls in EVENT_TYPES.items():
    _cls.wire_type = _tag

#: The optional fields the project adds to the contract's event types (spec/EVENTS.md lists the others; ``conflict``'s
#: ``attempt`` is left out on purpose: attempt fencing is a project rule, issue 17). A line may come from a writer that
#: does not know them: one of them holding a value of another type or range than the project writes is kept and
#: ignored, as an unknown field is (spec section 1), never a bad line (:func:`eventlog.reader.without_foreign_values`,
#: the one place the rule is applied; docs/DECISIONS.md, "Fields the project adds").
PROJECT_FIELDS: dict[type[Event], tuple[str, ...]] = {
    Released: ("actor",),
    ResumeFailed: ("actor",),
    WatcherRun: ("detail", "stale_after_s", "retired"),
    LaneCheck: ("unpicked_s", "quiet_s", "exit", "detail", "sending", "unsent", "period_s", "unobserved", "unsure",
                "timeout_s", "kill_grace_s", "general"),
    CatchupKicked: ("timeout_s", "kill_grace_s", "kicked_by", "launchd_domain"),
}

#: The field that names an event's stream, in the order the spec lists them.
KEY_FIELDS: tuple[str, ...] = ("handoff_id", "account", "product", "label", "session_id")

#: The fields that hold an id: the stream keys and the ids of watchers, workers, jobs, turns and controls. A command
#: to copy names an entity by one of them (docs/DECISIONS.md, "Ids a command can name").
ID_FIELDS: tuple[str, ...] = (*KEY_FIELDS, "watcher", "worker", "job_id", "turn_id", "target_turn_id", "covers_turn",
                              "control_id")

#: The longest id the appender writes, in characters: far above any id a writer uses (the seeds' and fixtures' are
#: at most 28), and small enough for any command's argument (4 KiB of UTF-8 at most) and any URL path (12 KiB
#: percent-encoded).
MAX_ID_CHARS: Final = 1024


#: Why no command can name a text holding a NUL (words that follow "it").
NUL_WORDS: Final = ("holds a NUL character (\\u0000), which no command's argument can carry (a shell drops it, so "
                    "a command to copy would name another id)")


def id_problem(value: str) -> str | None:
    """Why the appender does not write ``value`` as an id (words that follow "it"; None: it would): it holds a
    NUL, or it is longer than :data:`MAX_ID_CHARS`. A writer's rule only: readers read such ids of logs already
    written as before, and the views print no command that names them (``projections.triage.q``)."""
    if "\0" in value:
        return NUL_WORDS
    if len(value) > MAX_ID_CHARS:
        return (f"is {len(value):,} characters long, more than an id may be ({MAX_ID_CHARS:,}): no command to copy "
                "or URL could name it")
    return None


#: Time fields besides ``ts``; the reader checks each for an offset.
TIME_FIELDS: dict[type[Event], tuple[str, ...]] = {
    HandoffCreated: ("deadline",),
    LimitRecorded: ("limited_at", "reset_at"),
    CircuitOpened: ("open_until",),
}


def type_name(ev: Event) -> str:
    """The wire ``type`` of an event."""
    return ev.wire_type


def stream_of(ev: Event) -> tuple[str, str] | None:
    """The ``(key field, id)`` stream an event belongs to, or None (e.g. ``lane_check``)."""
    for name in KEY_FIELDS:
        value = getattr(ev, name, None)
        if value is not None:
            return (name, value)
    return None


# --- versions and upcasting ------------------------------------------------------

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

#: The version the structs above describe, per type (absent: 1).
CURRENT_VERSION: dict[str, int] = {}

#: ``(type, N) -> f``: f turns a version-N object into a version-N+1 object.
UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def register_upcaster(type_: str, from_version: int, fn: Upcaster) -> None:
    """Register how to read version ``from_version`` of ``type_`` as the next version."""
    UPCASTERS[(type_, from_version)] = fn


def upcast(obj: dict[str, Any]) -> dict[str, Any]:
    """Bring a decoded object up to its type's current version; ValueError when impossible."""
    type_ = obj["type"]
    current = CURRENT_VERSION.get(type_, 1)
    version = obj.get("v", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"v must be an integer >= 1, got {version!r}")
    if version > current:
        raise ValueError(f"v {version} is newer than this reader knows ({current}) for {type_}")
    while version < current:
        step = UPCASTERS.get((type_, version))
        if step is None:
            raise ValueError(f"no upcaster from v{version} of {type_}")
        obj = step(dict(obj))
        version += 1
        obj["v"] = version
    return obj


# --- times -------------------------------------------------------------------------


#: THE reading of a time of the log, used by every path (docs/DECISIONS.md, "One reading of a time"): Python's
#: ``datetime.fromisoformat`` (ISO 8601 as Python 3.11 reads it; ValueError when it is none).
read_time: Callable[[str], datetime] = datetime.fromisoformat

_times_decoder = msgspec.json.Decoder(list[Annotated[datetime, msgspec.Meta(tz=True)]])
_encode = msgspec.json.encode
#: Bytes of the JSON list of times msgspec reads exactly as :data:`read_time` does: digits, ``-:.+``, upper-case
#: ``T`` and ``Z`` (msgspec also takes a lower-case ``t``/``z``, which ``fromisoformat`` refuses).
_PLAIN_TIME_BYTES = b'0123456789-:.+TZ",[] '
#: A fraction past microseconds: msgspec rounds it where ``fromisoformat`` cuts it.
_LONG_FRACTION = re.compile(rb"\.[0-9]{7}")


#: The form every writer writes a time in (docs/DECISIONS.md, "Times are written in ISO 8601's extended form"):
#: ``YYYY-MM-DDTHH:MM[:SS[.fraction]]`` then ``Z`` or ``+hh:mm``/``-hh:mm``, upper-case ``T`` and ``Z``. Its values
#: (a month 13, an hour 24) are :data:`read_time`'s to check; readers read every form it reads.
WRITTEN_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?"
                          r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])")
#: :data:`WRITTEN_TIME` in words, for a person told to write a time so.
WRITTEN_TIME_FORM = "YYYY-MM-DDTHH:MM[:SS[.fraction]] followed by Z or an offset +hh:mm or -hh:mm"


def written_form(text: str, at: datetime) -> str:
    """A time an importer copies from a source file: ``text`` when it is in :data:`WRITTEN_TIME`'s form, else ``at``
    (the instant and offset it reads as) in that form, so a source writing ``+0000`` or a space is still imported."""
    return text if WRITTEN_TIME.fullmatch(text) else at.isoformat()


def read_times(texts: list[str]) -> list[datetime] | None:
    """Many times at once, each as :data:`read_time` reads it and each with its UTC offset, or None.

    The replay's fast path: msgspec's native datetimes (one C call for a whole block, and the same
    ``tzinfo`` object for every time with the same offset, which keeps comparing them cheap); where
    msgspec and ``fromisoformat`` could disagree (a fraction past microseconds, a lower-case ``t``,
    the basic format), :data:`read_time` itself, one by one. None when any text is bad, has no
    offset or lies outside the years 1900 to 9000; the caller then reads them one by one.
    """
    if texts and not (_FIRST_TEXT <= min(texts) and max(texts) < _PAST_LAST_TEXT):
        return None  # the year as written is the first four digits of an ISO 8601 time
    blob = _encode(texts)
    if not blob.translate(None, _PLAIN_TIME_BYTES) and _LONG_FRACTION.search(blob) is None:
        try:
            values: list[datetime] = _times_decoder.decode(blob)
        except msgspec.DecodeError:
            pass
        else:
            return values
    try:
        values = list(map(read_time, texts))
    except ValueError:
        return None
    if None in map(_tzinfo_of, values):
        return None
    return values


def good_times(texts: list[str]) -> list[datetime]:
    """The times of ``texts`` up to the first one :func:`read_times` refuses, each read alone by :data:`read_time`.

    The slow way to tell which time of many is bad; the same times, with the same offsets.
    """
    values: list[datetime] = []
    for text in texts:
        if not _FIRST_TEXT <= text < _PAST_LAST_TEXT:
            break
        try:
            value = read_time(text)
        except ValueError:
            break
        if value.tzinfo is None:
            break
        values.append(value)
    return values


_tzinfo_of = attrgetter("tzinfo")


_FIRST_TEXT = f"{FIRST_YEAR:04d}"
_PAST_LAST_TEXT = f"{LAST_YEAR + 1:04d}"


def parse_time(text: str, assume_tz: tzinfo | None = None) -> datetime:
    """Read an ISO 8601 time; ValueError without an offset unless ``assume_tz`` is given.

    A fixed offset comes with the same ``tzinfo`` object as the replay's times of that offset
    (:func:`read_times`), so comparing and subtracting them stays cheap.
    """
    value = read_time(text)
    zone = value.tzinfo
    if zone is None:
        if assume_tz is None:
            raise ValueError(f"time {text!r} has no UTC offset")
        return value.replace(tzinfo=assume_tz)
    if zone.__class__ is timezone:
        shared = _ZONES.get(zone)
        if shared is None:
            shared = _ZONES[zone] = _shared_zone(zone)
        if shared is not zone:
            value = value.replace(tzinfo=shared)
    return value


#: A fixed offset -> the tzinfo object msgspec gives times of that offset.
_ZONES: dict[tzinfo, tzinfo] = {}


def _shared_zone(zone: tzinfo) -> tzinfo:
    sample = datetime(2000, 1, 1, tzinfo=zone).isoformat()
    try:
        shared = _times_decoder.decode(_encode([sample]))[0].tzinfo
    except msgspec.DecodeError:  # an offset msgspec does not write (seconds in it)
        return zone
    return shared if shared == zone else zone


def schema() -> dict[str, Any]:
    """The JSON Schema of the event union."""
    return msgspec.json.schema(AnyEvent)

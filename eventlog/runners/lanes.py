"""Lane stalls (seed 001): the stall judge, and the runner that sends one resume per new stall.

:func:`judge_stalls` replays a log and judges every lane as of a time (now by
default), writing nothing: the ``impl-lane-watch/v1`` record. As of now, a lane's
time dated more than :data:`projections.ahead.TOLERANCE_S` ahead (a finished job,
a status, a commit: a writer's clock ahead) is a problem too: its lane cannot be
judged stalled until the clock passes it.

:func:`run_lanes` first observes every lane of ``observe_dir`` when it is given
(:func:`eventlog.runners.observe.observe_dir`: each ``NAME.env`` there, as
``eventlog observe lane`` would; a lane that cannot be observed is a problem,
named, and the others are still observed), so one timer observes and checks and
its ``lane_check`` is the heartbeat of both. A lane the log knows, not stopped,
that no ``NAME.env`` names is not observed: a problem, and no resume is sent for
it (its verdict is as of what was last read); each ``lane_check`` of the pass
states every lane or file it could not observe, and why (``unobserved``), for
the views. It then judges every lane at its clock and, **before any command
runs**, appends its ``lane_check`` (intent before the act; ts: the time it
judged at, so its record is the one the pass acted on) with how the pass stands:
``exit`` ``ok``, or ``error`` and a ``detail`` naming what it could not do (its
problems, as on stderr); ``sending`` when it names the resumes it is about to
send (below). When that line cannot be written (a full disk, a file this user
may not write, no event log, a torn tail no append cuts) no command runs:
nothing would record the resume, so every run would send it again. Then for each
lane that check finds stalled and that no ``resume_enqueued`` covers yet (same
product and kind, after the stall's anchor) and whose send no earlier pass cut
short, it runs the enqueue command with the product and the kind as its last two
arguments and in ``RESUME_PRODUCT`` and ``RESUME_KIND``, and then appends
``resume_enqueued``. The last non-empty line the command prints on stdout, if
any, is its ``task_branch`` (cut by :func:`~eventlog.runners.process.excerpt`).
Stopped and idle lanes are never stalled, so never resumed. The command's result
is its own exit: one that starts the work in the background and exits 0 has
enqueued it (seed 001's resume is asynchronous); the work it left running is not
waited for. A pass that ends in error after its ``lane_check`` (a failed send, a
resume not recorded, a stop signal) appends a second ``lane_check``, same ts,
that says so: a failed send, a stop signal, new bad lines and a log with no lane
all leave that trace in the log, and the views name a last pass that ended in
error (as failback's heartbeat). A ``lane_check`` with a ``detail`` states which
of its problems belong to no lane (``general``): a lane it could not observe and
a send cut short are their lane's own item in the views, said once.

- **A send is journalled before it goes** (project's rule for unknown effects, as
  spec section 3's stale ``resume_requested``; :mod:`projections.lanes`, "A send
  cut short"): the first ``lane_check`` names the resumes the pass is about to
  send (``sending``, product -> kind) and says ``exit: sending``. A send whose
  outcome the pass cannot know (the pass killed while it ran, ``kill -9``
  included; the command over its timeout or stopped by a stop signal, its
  process group stopped after it may have sent; the command killed by a signal
  not the pass's, the OOM killer's say) stays open: no later pass
  sends it again on its own; each names it (``unsure``, a problem: "did it
  arrive?") with the two commands a person chooses from: the ``eventlog
  append`` of its ``resume_enqueued`` (it arrived), or this run with
  ``--resend PRODUCT`` (``resend``: it did not; that pass journals it again). A
  ``resend`` that names a product with no open send (a typo, or one answered
  since) is refused by :meth:`LanesOptions.check`, before anything is done.
- The command fails (a non-zero exit of its own, or cannot start): no ``resume_enqueued``
  is appended and it is a problem; the pass's second ``lane_check`` lists it in
  ``unsent``, the stall is still uncovered, and the next run tries again.
- The resume is appended after the command succeeded. An append that fails
  there is in ``unrecorded`` (sent, not recorded), its line in ``unwritten``
  (:class:`~eventlog.runners.common.Unwritten`, as every runner keeps what an
  act gave), a problem prints the ``eventlog append`` command that records it
  (the exact line), and it ends the run; until it is appended, the send stays
  open (the next pass asks whether it arrived, never sends it again).
- Two runners of one log take turns (``LOG.lanes.lock``), so the second sees
  the first's ``resume_enqueued`` and does not send the same resume again. A
  lock file that cannot be opened or created (another user's, a directory this
  user may not write, no space or inode left) is a problem naming it and why:
  nothing is judged or sent.
- A stop signal (SIGTERM, SIGINT: :func:`eventlog.runners.process.stop_on_signals`)
  stops the running command's process group as a timeout does, starts no other
  (nor waits any longer for the lock): the resume it was sending is open (as
  above), those not started are ``unsent`` (the next run sends them);
  ``interrupted`` names the signal, and it is a problem (a second ``lane_check``
  says so; stopped while waiting for the lock, nothing is written).
- The ``lane_check`` it appends states the thresholds it judged with
  (``unpicked_s``, ``quiet_s``): ``tools/replay`` judges that line's record
  with them, and ``status``, ``explain``, ``follow``, ``serve``, ``stalls``
  and the dump judge lanes as this run did until a later check states others.
  It states ``period_s`` too (how often the runner runs): the views name the
  lanes pass late when no ``lane_check`` came for twice it
  (:meth:`projections.lanes.Lanes.heartbeat`).
- A stop signal while it observes (git's process group is stopped) ends the
  run there: nothing judged, no ``lane_check`` (as while waiting for the lock).

A log with no lane at all (nothing fed lane state: no ``eventlog observe lane``
ran) is a problem of the runner: its check judges nothing, so no stall could
ever be found, and a runner that stays quiet about it would look like all is well.

Both reports have ``problems`` (one line each) and ``status``: 0 nothing needs
a person, 1 a lane is stalled or a lane's time is dated ahead of now (the judge), or a command failed, the log could
not be read or written (or its lock file opened), it has bad lines (the runner: bad lines new since
the log's last ``lane_check``; older ones are in its ``notes``, stderr only), or it has no lane (the runner).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any

import msgspec

from eventlog.appender import AppendError
from eventlog.clock import NOW, At, Clock, now
from eventlog.logs import Log, Unreachable, no_event_log, open_log
from eventlog.runners.common import (
    BadLines,
    LockUnavailable,
    LogNotReached,
    PassBadLines,
    RunnerError,
    Unwritten,
    bad_lines,
    check_bounds,
    log_arg,
    not_a_directory,
    require_log,
    runner_lock,
)
from eventlog.runners.observe import ObserveReport, no_env_file, observe_dir
from eventlog.runners.process import DETAIL_CHARS, Interrupted, excerpt, run
from projections.ahead import dated_ahead
from projections.lanes import PERIOD_S, CheckRecord, Lanes, cut_short_said
from projections.runner import in_units, thresholds
from projections.triage import AHEAD_KIND, ahead_words, cut_short_cmds, explain_cmd, lane_stop_cmd

#: Seed 001: a finished job not picked up after this is stalled (90 minutes).
UNPICKED_S = 90 * 60.0
#: Seed 001: progress not updated for this long is stalled (8 hours).
QUIET_S = 8 * 3600.0
#: How long the enqueue command may take for one resume.
ENQUEUE_TIMEOUT_S = 300.0
#: SIGTERM to SIGKILL for an enqueue command over its timeout.
KILL_GRACE_S = 5.0


def _check_thresholds(unpicked_s: float | None, quiet_s: float | None) -> None:
    if (unpicked_s is not None and unpicked_s <= 0) or (quiet_s is not None and quiet_s <= 0):
        raise RunnerError("--unpicked and --quiet must be more than 0")


# --- the judge ---------------------------------------------------------------------------


@dataclass(kw_only=True)
class StallOptions:
    """What :func:`judge_stalls` is told."""

    log: str
    at: At = NOW
    #: None: the thresholds the log's last ``lane_check`` states (the lanes runner's), else the seed's.
    unpicked_s: float | None = None
    quiet_s: float | None = None
    assume_tz: tzinfo | None = None


class StallReport(msgspec.Struct, kw_only=True):
    """The record of every lane, the log's bad lines, and ``problems``: them and the lane times dated ahead of now."""

    record: CheckRecord
    bad_lines: BadLines
    problems: list[str]

    @property
    def stalled(self) -> bool:
        """Whether a lane is stalled."""
        return any(result["stalled"] for result in self.record["results"])

    @property
    def status(self) -> int:
        """1 when a lane is stalled, the log has bad lines or a lane's time is dated ahead of now, else 0."""
        return 1 if self.stalled or self.problems else 0


def judge_stalls(opts: StallOptions) -> StallReport:
    """Replay ``opts.log`` and judge every lane as of ``opts.at``; writes nothing.

    Raises RunnerError for bad thresholds, OSError when the log cannot be read.
    """
    _check_thresholds(opts.unpicked_s, opts.quiet_s)
    runner = thresholds(opts.unpicked_s, opts.quiet_s)
    with open_log(opts.log) as log:
        replay = log.replay(assume_tz=opts.assume_tz, runner=runner)
    at, text = opts.at.resolve(replay.last_at, replay.last_ts)
    if at is None:  # no event: no lane either
        at = now()
        text = at.isoformat()
    record = runner.lanes.judge(at, text or at.isoformat())
    found = bad_lines(replay)
    problem = found.problem(opts.log)
    ahead = [f"{opts.log}: {ahead_words(a)}; fix the clock of its writer (see {explain_cmd(log_arg(opts), a.id)})"
             for a in (dated_ahead(runner, at) if opts.at.live else []) if AHEAD_KIND[a.check] == "lane"]
    return StallReport(record=record, bad_lines=found, problems=([problem] if problem else []) + ahead)


# --- the runner ---------------------------------------------------------------------------


@dataclass(kw_only=True)
class LanesOptions:
    """What :func:`run_lanes` is told."""

    log: str
    enqueue_cmd: list[str]
    timeout_s: float = ENQUEUE_TIMEOUT_S
    kill_grace_s: float = KILL_GRACE_S
    unpicked_s: float = UNPICKED_S
    quiet_s: float = QUIET_S
    #: When the check is made: now (the default), a fixed time, or the log's last line.
    at: At = NOW
    assume_tz: tzinfo | None = None
    #: A directory of lane env files (``NAME.env``) to observe before the check (None: none; the lanes are fed
    #: by their own observers).
    observe_dir: str | None = None
    #: How often the runner runs (its timer's period; by default the shipped hourly timer's), stated in its
    #: ``lane_check``.
    period_s: float = PERIOD_S
    #: Products whose resume a pass cut short (outcome unknown) to send all the same: a person knows it did not
    #: arrive.
    resend: list[str] = field(default_factory=list)

    def check(self) -> None:
        """RunnerError when the runner cannot run with these options (nothing is written then)."""
        if not self.enqueue_cmd:
            raise RunnerError("--enqueue-cmd is empty")
        check_bounds(self.kill_grace_s, timeout_s=self.timeout_s, period_s=self.period_s)
        _check_thresholds(self.unpicked_s, self.quiet_s)
        if self.observe_dir is not None:
            not_a_directory(self.log)  # a log (file or stream) the observation creates, as eventlog observe lane does
        else:
            require_log(self.log, self.assume_tz)
        _check_resend(self)


def _check_resend(opts: LanesOptions) -> None:
    """RunnerError when ``opts.resend`` names a product that has no open send a pass cut short (a typo, or one
    answered since: a ``resume_enqueued`` or a later pass's ``unsent`` closed it), with those that have one: said
    before anything is observed, sent or written (a ``--resend`` that matched nothing was ignored in silence)."""
    if not opts.resend:
        return
    runner = thresholds(opts.unpicked_s, opts.quiet_s)
    try:
        with open_log(opts.log, assume_tz=opts.assume_tz) as log:
            if log.exists():  # none yet (--observe makes it): no send is open
                log.replay(assume_tz=opts.assume_tz, runner=runner)
    except Unreachable as err:
        raise LogNotReached(f"cannot read {opts.log}: {err}") from err
    except OSError as err:
        raise RunnerError(f"cannot read {opts.log}: {err.strerror or err}") from err
    cut = runner.lanes.cut_short_products()
    unknown = [product for product in opts.resend if product not in cut]
    if unknown:
        open_ = (f"the products with one are {', '.join(cut)}" if cut else
                 "no product has one (nothing to send again)")
        raise RunnerError(f"--resend {', '.join(unknown)}: {opts.log} has no open send of its resume that a lanes "
                          f"pass cut short (a typo, or one answered since: its resume_enqueued, or a later pass's "
                          f"unsent, closed it); {open_}; nothing was observed, sent or written")


class LanesReport(msgspec.Struct, kw_only=True):
    """What a lanes run did: the check it made, and each stall enqueued, already enqueued, or failed."""

    #: What observing each lane of ``observe_dir`` did, in file order (empty: none was given).
    observed: list[ObserveReport] = msgspec.field(default_factory=list)
    #: What this pass could not observe, and why: a lane by its product (one the log knows, not stopped, that no
    #: ``NAME.env`` of ``observe_dir`` names; one whose observation had a problem), a file that could not be used
    #: by its path. Its ``lane_check`` states it (``unobserved``), and the views name each.
    unobserved: dict[str, str] = msgspec.field(default_factory=dict)
    #: The lanes of ``unobserved`` that no ``NAME.env`` named: judged from what was last read, and sent no resume.
    not_observed: list[str] = msgspec.field(default_factory=list)
    check: CheckRecord | None = None
    #: Whether its ``lane_check`` was appended (before any command ran: none runs when it could not be).
    recorded: bool = False
    enqueued: list[dict[str, Any]] = msgspec.field(default_factory=list)
    already_enqueued: list[dict[str, Any]] = msgspec.field(default_factory=list)
    failed: list[dict[str, Any]] = msgspec.field(default_factory=list)
    #: Sent (the command succeeded), but its ``resume_enqueued`` could not be appended: later runs ask whether it
    #: arrived (never send it again) until a person appends it (its line is in ``unwritten``).
    unrecorded: list[dict[str, Any]] = msgspec.field(default_factory=list)
    #: The ``resume_enqueued`` of a resume sent that the log did not take: the line to append by hand (a problem).
    unwritten: list[Unwritten] = msgspec.field(default_factory=list)
    #: Resumes whose send's outcome is unknown (a pass, this one or an earlier one, stopped while sending it, or
    #: its command went over the timeout; ``since``: that pass's ``lane_check`` ts): not sent (again) until a
    #: person says whether it arrived (a problem each).
    unsure: list[dict[str, Any]] = msgspec.field(default_factory=list)
    bad_lines: PassBadLines = msgspec.field(default_factory=PassBadLines)
    #: The signal (SIGTERM, SIGINT) that stopped the run, None when none did.
    interrupted: str | None = None
    #: For a person too, but they change nothing (bad lines the previous check already read).
    notes: list[str] = msgspec.field(default_factory=list)
    problems: list[str] = msgspec.field(default_factory=list)
    #: The problems of ``problems`` that a lane's own item carries in the views (a lane or file it could not
    #: observe, a send cut short: ``lane_unobserved``, the stall's); its ``lane_check`` states the others, which
    #: belong to no lane, as ``general``.
    lane_problems: list[str] = msgspec.field(default_factory=list)

    def of_lane(self, *problems: str) -> None:
        """Add ``problems`` that a lane's own item carries (:attr:`lane_problems`)."""
        self.problems += problems
        self.lane_problems += problems

    @property
    def status(self) -> int:
        """1 when a problem needs a person, else 0."""
        return 1 if self.problems else 0

    def observed_text(self) -> list[str]:
        """What it observed, for people, one line each (to print before :meth:`text`)."""
        return [f"observed {line}" for report in self.observed for line in report.text()]

    def text(self) -> list[str]:
        """The report for people, one line each."""
        if self.check is None:
            return ["no lane check was made"]
        done = {(e["product"], e["kind"]): e for e in self.enqueued}
        already = {(e["product"], e["kind"]) for e in self.already_enqueued}
        failed = {(e["product"], e["kind"]): e for e in self.failed}
        unrecorded = {(e["product"], e["kind"]): e for e in self.unrecorded}
        unsure = {(e["product"], e["kind"]): e for e in self.unsure}
        out = [f"lane check at {self.check['checked_at']}" + ("" if self.recorded else " (NOT written to the log)")]
        if not self.check["results"]:
            out.append("  no lane: nothing feeds lane state (eventlog observe lane)")
        for result in self.check["results"]:
            product = result["product"]
            seen = self.observed_words(product)
            if not result["stalled"]:
                out.append(f"  {product}: {result['reason']}{seen}")
                continue
            key = (product, result["kind"])
            if key in unsure:
                out.append(f"  {product}: {key[1]}, did its resume arrive? unknown (the send of the pass at "
                           f"{unsure[key]['since']} was cut short): not sent again until a person says{seen}")
            elif key in done:
                branch = done[key]["task_branch"]
                out.append(f"  {product}: {key[1]}, resume enqueued" + (f" (task branch {branch})" if branch else ""))
            elif key in already:
                out.append(f"  {product}: {key[1]}, resume already enqueued{seen}")
            elif product in self.not_observed:
                out.append(f"  {product}: {key[1]}, not enqueued{seen}")
            elif key in failed:
                out.append(f"  {product}: {key[1]}, enqueue FAILED ({failed[key]['error']})")
            elif key in unrecorded:
                out.append(f"  {product}: {key[1]}, resume enqueued but NOT recorded (append its line: "
                           f"{unrecorded[key]['error']})")
            elif not self.recorded:
                out.append(f"  {product}: {key[1]}, not enqueued (its lane check could not be written: nothing "
                           "would record the resume)")
            else:
                out.append(f"  {product}: {key[1]}, not enqueued (the run stopped)")
        return out

    def observed_words(self, product: str) -> str:
        """What the report line of ``product`` adds when this pass could not observe it (empty when it could)."""
        if product in self.not_observed:
            return f" (NOT observed: {self.unobserved[product]})"
        return " (NOT observed in full: its problems are on stderr)" if product in self.unobserved else ""


def run_lanes(opts: LanesOptions) -> LanesReport:
    """One lanes run (see the module docstring); call ``opts.check()`` first.

    Never raises for a command or a log that fails, nor for a lock file that cannot be opened, nor for a stop
    signal (:func:`eventlog.runners.process.stop_on_signals`): that is in the report.
    """
    report = LanesReport()
    try:
        _observe(opts, report)
        _run_lanes(opts, report)
    except Interrupted as stop:  # while observing or waiting for the lock: nothing was judged, nothing is written
        _stopped(opts, report, stop)
    except LockUnavailable as err:
        report.problems += err.messages
    return report


def _observe(opts: LanesOptions, report: LanesReport) -> None:
    """The pass's first step: observe each lane of ``opts.observe_dir`` (none: nothing), its problems the pass's."""
    if opts.observe_dir is None:
        return
    report.observed = observe_dir(opts.observe_dir, opts.log, opts.assume_tz, opts.at)
    report.of_lane(*(problem for observed in report.observed for problem in observed.problems))


def _unobserved(opts: LanesOptions, lanes: Lanes, checked_at: str, report: LanesReport) -> None:
    """What the pass could not observe (``report.unobserved``), a lane of the log that no file of
    ``opts.observe_dir`` names among them (``report.not_observed``, each a problem; none without the option)."""
    if opts.observe_dir is None:
        return
    _all_retired(opts, lanes, report)
    for observed in report.observed:
        if observed.problems:
            report.unobserved[observed.product or observed.file or opts.observe_dir] = excerpt(
                "; ".join(observed.problems), DETAIL_CHARS)
    named = {observed.product for observed in report.observed if observed.product}
    unread = [observed.problems[0] for observed in report.observed if observed.file == opts.observe_dir]
    unused = [observed.file for observed in report.observed if not observed.product and observed.file
              and observed.file != opts.observe_dir]
    maybe = f" (unless it is in one that could not be used: {', '.join(unused)})" if unused else ""
    for product, lane in sorted(lanes.lanes.items()):
        if lane.stopped or product in named:
            continue
        why = (f"{unread[0]}: not observed" if unread else
               f"no NAME.env of {opts.observe_dir} names it (LANE_PRODUCT={product}){maybe}: not observed")
        why += ", so no resume is sent for it and its verdict is as of what was last read"
        report.unobserved[product] = why
        report.not_observed.append(product)
        report.of_lane(f"lane {product}: {why}; put its file back in {opts.observe_dir}, or, if it is retired, "
                       f"record its stop: {lane_stop_cmd(log_arg(opts), product, checked_at)}")


def _all_retired(opts: LanesOptions, lanes: Lanes, report: LanesReport) -> None:
    """An ``opts.observe_dir`` with no ``NAME.env`` is no problem while every lane of the log is stopped on purpose:
    a stopped lane needs no file, the last one retired too (docs/OPERATIONS.md, "Retiring a lane"); a note says so,
    and that the timer may go. A lane not stopped, or none in the log, keeps it a problem."""
    assert opts.observe_dir is not None
    empty = no_env_file(opts.observe_dir)
    if not lanes.lanes or any(not lane.stopped for lane in lanes.lanes.values()) or \
            [observed.problems for observed in report.observed] != [[empty]]:
        return
    report.observed = []
    report.problems.remove(empty)
    report.lane_problems.remove(empty)
    report.notes.append(f"{opts.observe_dir} holds no NAME.env and every lane the log knows is stopped on purpose "
                        "(retired): nothing to observe or resume; its timer may be disabled "
                        "(systemctl disable --now recovery-ledger-lanes.timer)")


def _stopped(opts: LanesOptions, report: LanesReport, stop: Interrupted) -> None:
    report.interrupted = stop.signal
    report.problems.append(f"{opts.log}: lanes run {stop.said()}")


def _run_lanes(opts: LanesOptions, report: LanesReport) -> None:
    with runner_lock(opts.log, "lanes", wait=True), open_log(opts.log, assume_tz=opts.assume_tz) as log:
        runner = thresholds(opts.unpicked_s, opts.quiet_s)
        try:
            replay = log.replay(assume_tz=opts.assume_tz, runner=runner)
        except OSError as err:
            report.problems.append(f"cannot read {opts.log}: {err.strerror or err}")
            return
        report.bad_lines = PassBadLines.seen(replay.bad_lines, runner.lanes.state.check_line)
        report.bad_lines.tell(opts.log, report.problems, report.notes)
        clock = opts.at.clock(replay.last_at)
        when = clock()
        checked_at = when.isoformat()
        lanes = runner.lanes
        report.check = lanes.judge(when, checked_at)
        _unobserved(opts, lanes, checked_at, report)
        if not report.check["results"] and no_event_log(opts.log, replay) is None:
            report.problems.append(no_lane(opts.log))
        stalls = _uncovered(opts, lanes, report)
        # Intent before the act: nothing would record a resume, nor that it was being sent.
        carried = {entry["product"]: entry["kind"] for entry in report.unsure}
        if not _record(opts, log, checked_at, report, sending=dict(stalls), unsure=carried):
            if stalls:
                report.problems.append(f"no resume sent for {len(stalls)} stall(s), since nothing could record it "
                                       "(its lane_check could not be written); the next run that can write tries "
                                       "again")
            return
        said = len(report.problems)
        try:
            _send(opts, log, stalls, clock, checked_at, report)
        except Interrupted as stop:
            _stopped(opts, report, stop)
            if stop.started:  # the send it stopped may have gone out (said after the stop, which says why)
                went = _keys(report.enqueued, report.failed, report.unsure)
                product, kind = next(stall for stall in stalls if stall not in went)
                _unsure(opts, report, product, kind, checked_at, f"the send was stopped by {stop.signal}")
        if len(report.problems) > said:  # the pass ended in error after its lane_check: a second one says so
            _record(opts, log, checked_at, report, **_outcomes(stalls, report))


def _uncovered(opts: LanesOptions, lanes: Lanes, report: LanesReport) -> list[tuple[str, str]]:
    """The stalls of ``report.check`` to send a resume for (product, kind): those a resume covers go in
    ``already_enqueued``, those whose send a pass cut short (unless ``opts.resend`` names them) in ``unsure``, and
    none of a lane this pass did not observe (``not_observed``)."""
    assert report.check is not None
    stalls = []
    for result in report.check["results"]:
        if not result["stalled"]:
            continue
        product, kind = result["product"], result["kind"]
        cut = lanes.cut_short(product, kind)
        if lanes.covered(product, kind):
            report.already_enqueued.append({"product": product, "kind": kind})
        elif cut is not None and product not in opts.resend:
            _unsure(opts, report, product, kind, cut.ts, cut_short_said(cut.ts))
        elif product not in report.not_observed:  # one nothing observed is judged from stale data: named, not sent
            stalls.append((product, kind))
    return stalls


def _unsure(opts: LanesOptions, report: LanesReport, product: str, kind: str, since: str, why: str) -> None:
    """A resume whose send's outcome is unknown (``why``): in ``unsure``, and a problem with what to type next."""
    entry = {"product": product, "kind": kind, "since": since, "why": why}
    report.unsure.append(entry)
    report.of_lane(_unsure_words(opts, entry))


def _unsure_words(opts: LanesOptions, entry: dict[str, Any]) -> str:
    """The problem an ``unsure`` entry is: did it arrive, and the commands (or, for a product no command can name,
    why not) a person chooses from."""
    product, kind = entry["product"], entry["kind"]
    asked = f"{product}: {kind}: {entry['why']}: did it arrive? No pass sends it again on its own."
    cmds = cut_short_cmds(log_arg(opts), product, kind, shlex.join(opts.enqueue_cmd))
    if len(cmds) == 1:
        return f"{asked} {cmds[0]}"
    arrived, resend = cmds
    return f"{asked} If it arrived, record it: {arrived}; if not, send it: {resend}"


def _outcomes(stalls: list[tuple[str, str]], report: LanesReport) -> dict[str, dict[str, str]]:
    """What the closing ``lane_check`` says of the pass's sends: ``unsure``, those still open (outcome unknown, or
    sent and not recorded, with those of earlier passes it carries), ``unsent``, those that did not go (failed,
    never started)."""
    still = _keys(report.unsure, report.unrecorded)
    return {"unsure": dict(sorted(still)),
            "unsent": {p: k for p, k in stalls if (p, k) not in still | _keys(report.enqueued)}}


def _keys(*sends: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """The (product, kind) of each entry of ``sends`` (the report's ``enqueued``, ``failed``, ``unsure``, ...)."""
    return {(entry["product"], entry["kind"]) for entries in sends for entry in entries}


def _send(opts: LanesOptions, log: Log, stalls: list[tuple[str, str]], clock: Clock, checked_at: str,
          report: LanesReport) -> None:
    """Run the enqueue command for each of ``stalls``, and append its resume; an append that fails ends it."""
    for product, kind in stalls:
        try:
            ran = run([*opts.enqueue_cmd, product, kind], env={"RESUME_PRODUCT": product, "RESUME_KIND": kind},
                      timeout_s=opts.timeout_s, grace_s=opts.kill_grace_s, capture_stdout=True)
        except Interrupted as stop:
            if stop.started:
                stop.what = (f"while {product} {kind}'s --enqueue-cmd ran (its process group was stopped): its "
                             "resume may have gone out")
            else:
                stop.what = f"before {product} {kind}'s --enqueue-cmd started: not sent, the next run sends it"
            raise
        if ran.timed_out:  # stopped after it may have sent
            _unsure(opts, report, product, kind, checked_at, f"--enqueue-cmd {ran.failure(opts.timeout_s)}")
            continue
        if ran.exit is not None and ran.exit < 0:  # killed by a signal not ours: it said nothing of its send
            _unsure(opts, report, product, kind, checked_at, f"--enqueue-cmd was {ran.ended()}")
            continue
        failure = ran.failure(opts.timeout_s)
        if failure is not None:
            report.failed.append({"product": product, "kind": kind, "error": failure})
            report.problems.append(f"{product}: {kind}: --enqueue-cmd failed ({failure}); "
                                   "no resume_enqueued, the next run retries")
            continue
        event: dict[str, Any] = {"type": "resume_enqueued", "ts": clock().isoformat(), "product": product,
                                 "kind": kind}
        branch = task_branch(ran.stdout)
        if branch is not None:
            event["task_branch"] = branch
        try:
            log.append([event])
        except AppendError as err:
            error = "cannot append resume_enqueued: " + "; ".join(err.messages)
            report.unrecorded.append({"product": product, "kind": kind, "task_branch": branch, "error": error})
            sent = f" (task branch {branch})" if branch else ""
            lost = Unwritten.of(log_arg(opts), f"the resume of {product} ({kind}) was enqueued{sent}", [event])
            report.unwritten.append(lost)
            report.problems += [f"{product}: {kind}: enqueued, but {error}; no other lane was tried, and later runs "
                                "ask whether it arrived (never send it again) until its line is appended",
                                lost.problem(opts.log)]
            return
        report.enqueued.append({"product": product, "kind": kind, "task_branch": branch})


def _record(opts: LanesOptions, log: Log, checked_at: str, report: LanesReport, *,
            sending: dict[str, str] | None = None,
            unsure: dict[str, str] | None = None, unsent: dict[str, str] | None = None) -> bool:
    """Append the pass's ``lane_check``: the thresholds it judged with, how the pass stands, and its sends; whether
    it was written.

    ``sending``: the resumes it is about to send (with the ``timeout_s`` and ``kill_grace_s`` that bound them);
    ``unsure``: the sends still open whose outcome is unknown, an earlier pass's or (the closing line) its own;
    ``unsent``: its sends that did not go. ``exit``: ``sending`` while it names a send (then as its ``detail``
    says once each is closed), else ``error`` or ``ok``; ``detail``: its problems, those sends apart (the views
    word them from the fields, so an answer clears them at once); ``general``, with it: those no lane's own item
    carries (:attr:`LanesReport.lane_problems`)."""
    asked = {_unsure_words(opts, entry) for entry in report.unsure}
    problems = [problem for problem in report.problems if problem not in asked]
    event: dict[str, Any] = {"type": "lane_check", "ts": checked_at, "unpicked_s": opts.unpicked_s,
                             "quiet_s": opts.quiet_s, "period_s": opts.period_s,
                             "exit": "sending" if sending or unsure else "error" if problems else "ok"}
    if problems:
        event["detail"] = excerpt("; ".join(problems), DETAIL_CHARS)
        event["general"] = [excerpt(problem, DETAIL_CHARS) for problem in problems
                            if problem not in report.lane_problems]
    if opts.observe_dir is not None:  # empty: it observed every lane (a pass without --observe says nothing)
        event["unobserved"] = report.unobserved
    if sending:
        event |= {"sending": sending, "timeout_s": opts.timeout_s, "kill_grace_s": opts.kill_grace_s}
    if unsure:
        event["unsure"] = unsure
    if unsent:
        event["unsent"] = unsent
    try:
        log.append([event])
    except AppendError as err:
        report.problems.append("cannot append the lane check: " + "; ".join(err.messages))
        return False
    report.recorded = True
    return True


def no_lane(log: str) -> str:
    """Why a check of a log with no lane at all judged nothing, and what feeds lane state."""
    return (f"{log}: no lane in the log (no status_updated, job_finished, repo_commit, lane_stopped or lane_started "
            "of any product): nothing is judged, so no stall can ever be found; feed each lane's state with "
            "--observe DIR (a NAME.env per lane) or `eventlog observe lane LOG PRODUCT` every 10 minutes "
            "(docs/OPERATIONS.md)")


def task_branch(stdout: str) -> str | None:
    """The last non-empty line of the command's stdout, stripped and cut (:func:`~eventlog.runners.process.excerpt`),
    or None."""
    for line in reversed(stdout.splitlines()):
        if line.strip():
            return excerpt(line)
    return None


__all__ = [
    "ENQUEUE_TIMEOUT_S", "KILL_GRACE_S", "PERIOD_S", "QUIET_S", "UNPICKED_S", "LanesOptions", "LanesReport",
    "StallOptions", "StallReport", "in_units", "judge_stalls", "no_lane", "run_lanes", "task_branch", "thresholds",
]

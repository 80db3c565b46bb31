"""Classify a failback probe: from exit status, HTTP status and output text to one of six outcomes.

The seed's watcher only looked for ``PING_OK`` and so could not tell "still
limited" from "auth broken". Here a small probe (never the original work) is
judged by :data:`RULES`, a table read top to bottom, first match wins:

==================  ===================================================================
``ok``              exit 0, HTTP status (if any) below 400, and the expected answer
                    (``PING_OK``) in the output: success is decided by the answer, not
                    by the absence of words such as "limit"
``network_timeout`` killed by our timeout (exit None) or exit 124 (``timeout(1)``),
                    or HTTP 408
``auth_error``      HTTP 401 or 403
``quota_limited``   HTTP 402, or 429 whose text names an exhausted quota
``transient``       HTTP 429 otherwise (congestion), 5xx, 529
``auth_error``      text: invalid key, authentication, /login, expired token, ...
``quota_limited``   text: usage/weekly/5-hour limit, quota exceeded, out of credits,
                    "resets 5pm", ...
``network_timeout`` text: timed out, ETIMEDOUT, ECONNRESET, ENOTFOUND, could not
                    resolve host, connection error (a network failure of any kind)
``transient``       text: overloaded, rate limit, too many requests, retry after, ...
``unexpected``      anything else
==================  ===================================================================

A probe that gave no answer of its own (over our timeout, killed by a
signal, exit 126 or 127) keeps the outcome the table gives; its detail names
the exit or signal in place of a row's words that judge by the exit alone
("probe timed out", "no rule matched"): :func:`judge`. The output in a
detail is cut to 200 characters, with a mark.

When no HTTP status is given, one written in the text (``API Error: 429``,
``HTTP/1.1 503``, ``"status": 401``) is used.

For ``quota_limited`` the result carries a :class:`Limit` for the account's
ledger. A reset time stated in the message (an epoch after ``|``, an ISO 8601
time, "resets 5pm (Asia/Tokyo)", "resets Oct 9, 10am", "try again in 2 hours")
is ``explicit``. Otherwise the limit's period is looked up in :data:`ESTIMATES`
(a weekly limit with no time: ``estimated`` 24 h after the probe, with the
basis in ``source``; the failback backoff widens when the estimate proves
wrong); with no period either it is ``unknown`` with no ``reset_at``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec

from eventlog.events import Confidence, ProbeOutcome
from eventlog.runners.process import Ran, excerpt

#: The answer a healthy probe prints (the seed: "PING_OKだけ返す").
EXPECTED = "PING_OK"

_I = re.IGNORECASE

AUTH_TEXT = re.compile(
    r"invalid[ _-]?(?:x-)?api[ _-]?key|authentication|unauthori[sz]ed|forbidden|permission_error"
    r"|/login|log ?in again|not logged in|(?:oauth )?token (?:has )?expired|invalid credentials",
    _I,
)
QUOTA_TEXT = re.compile(
    r"\b(?:usage|weekly|daily|monthly|session|5-hour|five-hour|hourly|plan|subscription|spending)\s+limit"
    r"|(?:hit|reached) your (?:usage )?limit|limit reached\|\d{9,}"
    r"|exceeded your (?:current )?quota|insufficient_quota|quota (?:exceeded|exhausted|reached)"
    r"|out of (?:credits|usage)|credit balance is too low"
    r"|\bresets?\s+(?:at\s+|on\s+|in\s+)?(?:[a-z]{3,9},?\s+)?\d",
    _I,
)
NETWORK_TEXT = re.compile(
    r"timed? ?out|timeout|deadline exceeded|ETIMEDOUT|ECONNRESET|ECONNREFUSED|ENOTFOUND|EAI_AGAIN"
    r"|could not resolve|network is unreachable|connection (?:error|refused|reset)|socket hang up",
    _I,
)
TRANSIENT_TEXT = re.compile(
    r"overloaded|rate[ _-]?limit|too many requests|try again (?:later|in)|retry[ -]after|temporarily"
    r"|service unavailable|bad gateway|internal server error|server error|at capacity|congest",
    _I,
)

_STATUS_IN_TEXT = re.compile(
    r"API Error:?\s*(\d{3})\b|\bHTTP(?:/\d(?:\.\d)?)?\s+(\d{3})\b"
    r"|(?<!exit )\bstatus(?:[ _]?code)?\"?\s*[:=]?\s*(\d{3})\b"
    r"|\b(\d{3})\s+(?:Too Many Requests|Unauthorized|Forbidden|Service Unavailable|Bad Gateway"
    r"|Internal Server Error|Gateway Timeout|Payment Required)",
    _I,
)


@dataclass(frozen=True)
class Rule:
    """One row of the table: every condition given must hold."""

    outcome: ProbeOutcome
    why: str
    exits: frozenset[int | None] | None = None
    statuses: frozenset[int] | None = None
    text: re.Pattern[str] | None = None
    expected: bool = False


_5XX = frozenset({500, 502, 503, 504, 529})

#: The classifier, top to bottom, first match wins.
RULES: tuple[Rule, ...] = (
    Rule("ok", "expected answer", exits=frozenset({0}), expected=True),
    Rule("network_timeout", "probe timed out", exits=frozenset({None, 124})),
    Rule("network_timeout", "HTTP 408", statuses=frozenset({408})),
    Rule("auth_error", "HTTP 401/403", statuses=frozenset({401, 403})),
    Rule("quota_limited", "HTTP 402", statuses=frozenset({402})),
    Rule("quota_limited", "HTTP 429 naming a quota", statuses=frozenset({429}), text=QUOTA_TEXT),
    Rule("transient", "HTTP 429 congestion", statuses=frozenset({429})),
    Rule("transient", "HTTP 5xx", statuses=_5XX),
    Rule("auth_error", "auth error text", text=AUTH_TEXT),
    Rule("quota_limited", "quota limit text", text=QUOTA_TEXT),
    Rule("network_timeout", "network error text", text=NETWORK_TEXT),
    Rule("transient", "congestion text", text=TRANSIENT_TEXT),
    Rule("unexpected", "no rule matched"),
)


class Limit(msgspec.Struct, frozen=True, kw_only=True):
    """A limit for the account's ledger (the fields of ``limit_recorded``)."""

    limited_at: str
    reset_at: str | None
    source: str
    confidence: Confidence


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """What a probe came to."""

    outcome: ProbeOutcome
    status: int | None
    detail: str
    limit: Limit | None = None


def classify(
    exit_status: int | None,
    http_status: int | None,
    text: str,
    *,
    now: datetime,
    expected: str = EXPECTED,
    no_answer: str | None = None,
    more: int = 0,
) -> Verdict:
    """Classify one probe; ``exit_status`` None means it was killed by our timeout; ``now`` is aware.

    ``no_answer`` says why the probe gave no answer of its own (``timed out after 3 s``, ``killed by
    SIGKILL``, ``exit 127``: :meth:`eventlog.runners.process.Ran.no_answer`). It changes no outcome; the
    detail names it, in place of the rule's words when the rule judges by the exit alone (the timeout
    row, ``no rule matched``). The output in the detail is cut (:func:`eventlog.runners.process.excerpt`;
    ``more``: bytes of it not kept, said there).
    """
    status = http_status if http_status is not None else status_in(text)
    rule = next(r for r in RULES if _matches(r, exit_status, status, text, expected))
    why = rule.why
    if no_answer:
        why = no_answer if rule.text is None and rule.statuses is None else f"{rule.why} ({no_answer})"
    said = excerpt(text, more=more)
    detail = f"{why}: {said}" if said else why
    limit = read_limit(text, now) if rule.outcome == "quota_limited" else None
    return Verdict(outcome=rule.outcome, status=status, detail=detail, limit=limit)


def judge(ran: Ran, timeout_s: float, *, now: datetime, expected: str = EXPECTED) -> Verdict | None:
    """Classify a probe command's run (None: it could not start): :func:`classify` of its stdout and stderr,
    its exit (None: it ran over ``timeout_s``), and why it gave no answer when it gave none."""
    if not ran.started:
        return None
    text = ran.stdout + ("\n" + ran.stderr if ran.stderr else "")
    return classify(None if ran.timed_out else ran.exit, None, text, now=now, expected=expected,
                    no_answer=ran.no_answer(timeout_s), more=ran.stdout_cut + ran.stderr_cut)


def _matches(rule: Rule, exit_status: int | None, status: int | None, text: str, expected: str) -> bool:
    if rule.exits is not None and exit_status not in rule.exits:
        return False
    if rule.statuses is not None and status not in rule.statuses:
        return False
    if rule.expected and (expected not in text or (status is not None and status >= 400)):
        return False
    return rule.text is None or rule.text.search(text) is not None


def status_in(text: str) -> int | None:
    """An HTTP status written in the output, or None."""
    m = _STATUS_IN_TEXT.search(text)
    if m is None:
        return None
    value = int(next(g for g in m.groups() if g is not None))
    return value if 200 <= value <= 599 else None


# --- reset times ----------------------------------------------------------------------

_EPOCH = re.compile(r"\|(\d{10})\b")
_ISO = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})")
_UNIT = r"(?:d|days?|h|hrs?|hours?|m|mins?|minutes?|s|secs?|seconds?)"
_RELATIVE = re.compile(
    r"(?:resets?|try again|retry|available(?: again)?)\s+(?:in|after)\s+"
    rf"((?:\d+\s*{_UNIT}\b[\s,]*(?:and\s+)?)+)",
    _I,
)
_PART = re.compile(rf"(\d+)\s*({_UNIT})\b", _I)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_CLOCK = re.compile(
    r"(?:resets?|try again|available(?: again)?)\s+(?:at\s+|on\s+)?"
    r"(?:(?P<wd>mon|tue|wed|thu|fri|sat|sun)[a-z]*,?\s+)?"
    r"(?:(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(?P<day>\d{1,2}),?\s+(?:at\s+)?)?"
    r"(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ampm>[ap]\.?m\b\.?)?"
    r"(?:\s*\((?P<tz>UTC|[A-Za-z_]+/[A-Za-z_/+-]+)\))?",
    _I,
)

#: Limit periods with no stated reset: (pattern, assumed wait, label). Wrong guesses are backed off.
ESTIMATES: tuple[tuple[re.Pattern[str], timedelta, str], ...] = (
    (re.compile(r"week|7-day", _I), timedelta(hours=24), "weekly limit"),
    (re.compile(r"month", _I), timedelta(hours=24), "monthly limit"),
    (re.compile(r"daily|per day|24-hour", _I), timedelta(hours=24), "daily limit"),
    (re.compile(r"5-hour|five-hour|5 hour|session", _I), timedelta(hours=5), "5-hour limit"),
    (re.compile(r"hourly|per hour", _I), timedelta(hours=1), "hourly limit"),
)


def read_limit(text: str, now: datetime) -> Limit:
    """The limit a quota message states (``explicit``), else an estimate, else ``unknown``."""
    limited_at = now.isoformat(timespec="seconds")
    stated = stated_reset(text, now)
    if stated is not None:
        reset, said = stated
        return Limit(limited_at=limited_at, reset_at=reset, source=f"parsed-limit-message: {excerpt(said)}",
                     confidence="explicit")
    for pattern, wait, label in ESTIMATES:
        if pattern.search(text):
            hours = wait.total_seconds() / 3600
            return Limit(
                limited_at=limited_at,
                reset_at=(now + wait).isoformat(timespec="seconds"),
                source=f"estimated: {label} with no reset time stated; assumed {hours:g}h after the probe",
                confidence="estimated",
            )
    return Limit(limited_at=limited_at, reset_at=None, source="no reset time stated", confidence="unknown")


def stated_reset(text: str, now: datetime) -> tuple[str, str] | None:
    """``(reset_at, the words it was read from)`` when the text states a reset time."""
    m = _EPOCH.search(text)
    if m:
        return datetime.fromtimestamp(int(m.group(1)), tz=now.tzinfo).isoformat(timespec="seconds"), m.group(0)
    m = _ISO.search(text)
    if m:
        try:
            value = datetime.fromisoformat(m.group(0).replace(" ", "T", 1))
        except ValueError:
            value = None
        if value is not None:
            return value.isoformat(), m.group(0)
    m = _RELATIVE.search(text)
    if m:
        wait = timedelta()
        for amount, unit in _PART.findall(m.group(1)):
            wait += timedelta(**{_unit(unit): int(amount)})
        return (now + wait).isoformat(timespec="seconds"), m.group(0).strip(" ,")
    for m in _CLOCK.finditer(text):
        value = _clock(m, now)
        if value is not None:
            return value.isoformat(timespec="seconds"), m.group(0).strip()
    return None


def _unit(unit: str) -> str:
    return {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}[unit[0].lower()]


def _clock(m: re.Match[str], now: datetime) -> datetime | None:
    """The next time at or after ``now`` that a "resets 5pm"-style match names."""
    if m.group("ampm") is None and m.group("m") is None:
        return None  # "resets 5" alone is too vague to be a time
    hour, minute = int(m.group("h")), int(m.group("m") or 0)
    ampm = (m.group("ampm") or "").lower()
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm.startswith("p") else 0)
    if hour > 23 or minute > 59:
        return None
    zone = now.tzinfo or UTC
    if m.group("tz"):
        try:
            zone = ZoneInfo("UTC" if m.group("tz").upper() == "UTC" else m.group("tz"))
        except (ZoneInfoNotFoundError, ValueError):
            return None
    local = now.astimezone(zone)
    if m.group("mon"):
        month, day = _MONTHS.index(m.group("mon")[:3].lower()) + 1, int(m.group("day"))
        try:
            value = local.replace(month=month, day=day, hour=hour, minute=minute, second=0, microsecond=0)
            if value < local - timedelta(days=1):
                value = value.replace(year=value.year + 1)
        except ValueError:
            return None
        return value
    value = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if m.group("wd"):
        ahead = (_DAYS.index(m.group("wd")[:3].lower()) - value.weekday()) % 7
        value += timedelta(days=ahead)
    if value < local:
        value += timedelta(days=7 if m.group("wd") else 1)
    return value

"""The probe classifier on a corpus of realistic messages (seed 000: six outcomes, not ok/failed)."""

from __future__ import annotations

from datetime import datetime

import pytest

from eventlog.probe import RULES, classify, read_limit, status_in

NOW = datetime.fromisoformat("2026-08-03T10:00:00+09:00")  # a Monday

CORPUS: list[tuple[str, int | None, int | None, str, str]] = [
    # (name, exit status, HTTP status, output, outcome)
    ("ping ok", 0, None, "PING_OK\n", "ok"),
    ("ok that mentions a limit", 0, None, "PING_OK\n(note: 80% of your weekly usage limit used; resets 5pm)", "ok"),
    ("ok with http 200", 0, 200, "PING_OK", "ok"),
    ("5-hour limit", 1, None, "5-hour limit reached ∙ resets 5pm", "quota_limited"),
    ("hit your limit, zone", 1, None, "You've hit your limit · resets 5pm (Asia/Tokyo)", "quota_limited"),
    ("epoch limit", 1, None, "Claude AI usage limit reached|1785747600", "quota_limited"),
    ("weekly, no time", 1, None, "Weekly limit reached", "quota_limited"),
    ("429 usage limit", 1, 429, "usage limit reached for your plan, resets at 5pm", "quota_limited"),
    ("429 quota in text", 1, None,
     "HTTP 429: You exceeded your current quota, please check your plan and billing details.", "quota_limited"),
    ("try again in", 1, None, "You've hit your usage limit. Upgrade to Pro or try again in 2 hours 30 minutes.",
     "quota_limited"),
    ("429 congestion", 1, 429,
     '{"type":"error","error":{"type":"rate_limit_error","message":"rate limit, retry after 20s"}}', "transient"),
    ("429 in text, overloaded", 1, None, "API Error: 429 Too Many Requests: servers overloaded, retry after 20s",
     "transient"),
    ("529 overloaded", 1, None,
     'API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}', "transient"),
    ("503", 1, 503, "Service Unavailable", "transient"),
    ("rate limit text with limit reached", 1, None,
     "Rate limit reached for gpt-4 in organization org-x on tokens per min. Please try again in 20s.", "transient"),
    ("401", 1, None, 'API Error: 401 {"type":"error","error":{"type":"authentication_error",'
                     '"message":"OAuth token has expired."}}', "auth_error"),
    ("403", 1, 403, "Forbidden", "auth_error"),
    ("invalid key", 1, None, "Invalid API key · Please run /login", "auth_error"),
    ("exit 124", 124, None, "", "network_timeout"),
    ("killed by our timeout", None, None, "waiting for response", "network_timeout"),
    ("timed out text", 1, None, "API Error: Request timed out.", "network_timeout"),
    ("dns", 6, None, "curl: (6) Could not resolve host: api.anthropic.com", "network_timeout"),
    ("econnreset", 1, None, "Error: read ECONNRESET", "network_timeout"),
    ("unknown output", 0, None, "Hello! How can I help you today?", "unexpected"),
    ("crash", 139, None, "Segmentation fault", "unexpected"),
    ("empty", 1, None, "", "unexpected"),
    ("exit status is not http", 1, None, "exit status 127: not found", "unexpected"),
]


@pytest.mark.parametrize(("name", "exit_status", "status", "text", "outcome"), CORPUS, ids=[c[0] for c in CORPUS])
def test_corpus(name: str, exit_status: int | None, status: int | None, text: str, outcome: str) -> None:
    verdict = classify(exit_status, status, text, now=NOW)
    assert verdict.outcome == outcome
    assert (verdict.limit is not None) == (outcome == "quota_limited")
    assert verdict.detail


def test_every_outcome_is_reachable_and_the_table_ends_in_unexpected() -> None:
    assert {c[4] for c in CORPUS} == {"ok", "quota_limited", "transient", "auth_error", "network_timeout", "unexpected"}
    assert RULES[-1].outcome == "unexpected"
    assert RULES[0].outcome == "ok"


def test_success_is_the_expected_answer_not_the_absence_of_words() -> None:
    assert classify(0, None, "usage limit reached", now=NOW).outcome == "quota_limited"
    assert classify(0, None, "PING_OK usage limit reached", now=NOW).outcome == "ok"
    assert classify(1, None, "PING_OK", now=NOW).outcome != "ok"  # the process failed
    assert classify(0, 429, "PING_OK", now=NOW).outcome == "transient"  # an error status is not an answer
    assert classify(0, None, "READY", now=NOW, expected="READY").outcome == "ok"


def test_status_read_from_the_text() -> None:
    assert status_in("API Error: 529 {...}") == 529
    assert status_in("HTTP/1.1 503 Service Unavailable") == 503
    assert status_in('{"status": 401}') == 401
    assert status_in("429 Too Many Requests") == 429
    assert status_in("exit status 127") is None
    assert status_in("PING_OK") is None
    assert classify(1, None, "API Error: 401 nope", now=NOW).status == 401


@pytest.mark.parametrize(
    ("text", "reset_at", "said"),
    [
        ("5-hour limit reached ∙ resets 5pm", "2026-08-03T17:00:00+09:00", "resets 5pm"),
        ("You've hit your limit · resets 5pm (Asia/Tokyo)", "2026-08-03T17:00:00+09:00", "resets 5pm (Asia/Tokyo)"),
        # 9am today has passed at 10:00: the next 9am.
        ("usage limit reached, resets 9am", "2026-08-04T09:00:00+09:00", "resets 9am"),
        ("usage limit reached, resets at 17:30", "2026-08-03T17:30:00+09:00", "resets at 17:30"),
        ("usage limit reached, resets 5pm (UTC)", "2026-08-03T17:00:00+00:00", "resets 5pm (UTC)"),
        ("Weekly limit reached ∙ resets Aug 7, 10am", "2026-08-07T10:00:00+09:00", "resets Aug 7, 10am"),
        ("usage limit reached; resets Thu 9am", "2026-08-06T09:00:00+09:00", "resets Thu 9am"),
        # 2026-08-03T17:00:00+09:00 is 1785744000 seconds after the epoch.
        ("Claude AI usage limit reached|1785744000", "2026-08-03T17:00:00+09:00", "|1785744000"),
        ("quota exceeded; resets at 2026-08-03T17:00:00+09:00", "2026-08-03T17:00:00+09:00",
         "2026-08-03T17:00:00+09:00"),
        ("You've hit your usage limit. Try again in 2 hours 30 minutes.", "2026-08-03T12:30:00+09:00",
         "Try again in 2 hours 30 minutes"),
    ],
)
def test_stated_reset_is_explicit(text: str, reset_at: str, said: str) -> None:
    limit = classify(1, None, text, now=NOW).limit
    assert limit is not None
    assert limit.confidence == "explicit"
    assert limit.reset_at == reset_at
    assert limit.source == f"parsed-limit-message: {said}"
    assert limit.limited_at == "2026-08-03T10:00:00+09:00"


def test_weekly_limit_without_a_time_is_estimated_with_its_basis() -> None:
    limit = read_limit("Weekly limit reached", NOW)
    assert limit.confidence == "estimated"
    assert limit.reset_at == "2026-08-04T10:00:00+09:00"  # 24 h after the probe
    assert "weekly limit" in limit.source and "24h" in limit.source


def test_five_hour_limit_without_a_time_is_estimated_five_hours() -> None:
    limit = read_limit("5-hour limit reached", NOW)
    assert (limit.confidence, limit.reset_at) == ("estimated", "2026-08-03T15:00:00+09:00")


def test_quota_with_no_period_and_no_time_is_unknown() -> None:
    limit = read_limit("You exceeded your current quota", NOW)
    assert (limit.confidence, limit.reset_at) == ("unknown", None)


def test_a_bare_number_is_not_read_as_a_time() -> None:
    assert read_limit("usage limit reached, resets 5", NOW).confidence == "unknown"

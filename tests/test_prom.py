"""The Prometheus text exposition parses, and says what the dump says."""

from __future__ import annotations

import json

from prometheus_client.parser import text_string_to_metric_families

from eventlog.prom import exposition
from tests.conftest import ROOT


def test_every_fixture_exposition_parses() -> None:
    for expected in sorted((ROOT / "fixtures").glob("*.expected.json")):
        dump = json.loads(expected.read_text())
        families = {f.name: f for f in text_string_to_metric_families(exposition(dump))}
        events = families["recovery_events"].samples[0]
        assert events.value == dump["events"]
        assert families["recovery_bad_lines"].samples[0].value == len(dump["bad_lines"])
        by_state = {s.labels["state"]: s.value for s in families["recovery_handoffs"].samples}
        assert by_state == dump["handoffs"]["by_state"]


def test_labels_are_escaped() -> None:
    dump = json.loads((ROOT / "fixtures" / "log_empty.expected.json").read_text())
    dump["log"] = 'we"ird\\path\nname'
    families = list(text_string_to_metric_families(exposition(dump)))
    assert families[0].samples[0].labels["log"] == 'we"ird\\path\nname'

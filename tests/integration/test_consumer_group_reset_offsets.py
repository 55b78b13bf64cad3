"""kafka-consumer-groups --reset-offsets scenarios against a real broker: --to-datetime and --by-duration (offsets
by record timestamp, ListOffsets), --to-current, --shift-by and --to-offset with Kafka's range checks, and the
dry-run default."""

from __future__ import annotations

import datetime
import time

import pytest

from tests.helpers.tools import run_tool
from tests.helpers.topics import create_topic, produce_raw, record_batch

pytestmark = pytest.mark.integration

MINUTE = 60_000


@pytest.fixture(scope="module")
def stamped(module_broker):
    """Topic ``stamped``: offsets 0-9 stamped an hour ago, 10-19 thirty minutes ago, 20-29 one minute ago."""
    now = int(time.time() * 1000)
    create_topic(module_broker.bootstrap, "stamped", 1)
    stamps = [now - 60 * MINUTE, now - 30 * MINUTE, now - MINUTE]
    for ts in stamps:
        assert produce_raw(module_broker.bootstrap, "stamped", record_batch(10, ts))["error_code"] == 0
    return module_broker, stamps


def reset(bootstrap, group, *scenario, execute=True):
    run = run_tool(
        "consumer_group_command", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group,
        "--topic", "stamped", *scenario, *(["--execute"] if execute else []),
    )  # fmt: skip
    return run


def new_offset(run) -> int:
    assert run.returncode == 0, run.stderr
    lines = [line.split() for line in run.stdout.splitlines() if line.strip() and not line.startswith("Warn")]
    assert lines[0] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    ((_group, topic, partition, offset),) = lines[1:]
    assert (topic, partition) == ("stamped", "0")
    return int(offset)


def iso(ms: int, tz: datetime.timezone = datetime.UTC, zone: str = "") -> str:
    when = datetime.datetime.fromtimestamp(ms / 1000, tz)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}{zone}"


def test_to_datetime_finds_the_first_offset_at_or_after_the_time(stamped):
    broker, (t0, t1, t2) = stamped
    assert new_offset(reset(broker.bootstrap, "dt", "--to-datetime", iso(t1))) == 10
    assert new_offset(reset(broker.bootstrap, "dt", "--to-datetime", iso(t1 + 1))) == 20
    plus2 = datetime.timezone(datetime.timedelta(hours=2))
    assert new_offset(reset(broker.bootstrap, "dt", "--to-datetime", iso(t0, plus2, "+02:00"))) == 0
    assert new_offset(reset(broker.bootstrap, "dt", "--to-datetime", iso(t2, plus2, "+0200"))) == 20
    assert new_offset(reset(broker.bootstrap, "dt", "--to-datetime", iso(t2, plus2, "+02"))) == 20
    late = reset(broker.bootstrap, "dt", "--to-datetime", iso(t2 + MINUTE))
    assert "Warn: Partition 0 from topic stamped is empty. Falling back to latest known offset." in late.stdout
    assert new_offset(late) == 30
    bad = reset(broker.bootstrap, "dt", "--to-datetime", "2024-01-01 10:00:00")
    assert bad.returncode == 1 and "'T'" in bad.stderr


def test_by_duration_counts_back_from_now(stamped):
    broker, _ = stamped
    assert new_offset(reset(broker.bootstrap, "dur", "--by-duration", "PT45M")) == 10
    assert new_offset(reset(broker.bootstrap, "dur", "--by-duration", "P1DT1H")) == 0
    assert new_offset(reset(broker.bootstrap, "dur", "--by-duration", "PT5M")) == 20
    assert new_offset(reset(broker.bootstrap, "dur", "--by-duration", "PT10S")) == 30
    bad = reset(broker.bootstrap, "dur", "--by-duration", "45 minutes")
    assert bad.returncode == 1 and "Text cannot be parsed to a Duration" in bad.stderr


def describe_offset(bootstrap, group) -> str:
    run = run_tool("consumer_group_command", "--bootstrap-server", bootstrap, "--describe", "--group", group)
    assert run.returncode == 0, run.stderr
    (row,) = [line.split() for line in run.stdout.splitlines() if line.startswith(group)]
    return row[3]


def test_dry_run_is_the_default_and_to_current_shift_by_to_offset_commit(stamped):
    broker, _ = stamped
    dry = reset(broker.bootstrap, "cur", "--to-offset", "5", execute=False)
    assert new_offset(dry) == 5
    assert "WARN: No action will be performed as the --execute option is missing." in dry.stderr
    assert new_offset(reset(broker.bootstrap, "cur", "--to-current", execute=False)) == 30  # nothing committed
    noshift = reset(broker.bootstrap, "cur", "--shift-by", "1", execute=False)
    assert noshift.returncode == 1
    assert "Cannot shift offset for partition stamped-0 since there is no current committed offset" in noshift.stderr
    assert new_offset(reset(broker.bootstrap, "cur", "--to-offset", "5")) == 5
    assert describe_offset(broker.bootstrap, "cur") == "5"
    assert new_offset(reset(broker.bootstrap, "cur", "--to-current")) == 5
    assert new_offset(reset(broker.bootstrap, "cur", "--shift-by", "3")) == 8
    assert new_offset(reset(broker.bootstrap, "cur", "--shift-by", "-100")) == 0  # clamped to the log start
    assert new_offset(reset(broker.bootstrap, "cur", "--to-offset", "1000")) == 30  # clamped to the log end
    assert new_offset(reset(broker.bootstrap, "cur", "--by-duration", "PT45M", "--dry-run", execute=False)) == 10
    assert describe_offset(broker.bootstrap, "cur") == "30"


def test_export_then_from_file_round_trips_the_plan(stamped, tmp_path):
    """``--export`` prints Kafka's CSV instead of the table; ``--from-file`` takes such a file as the plan
    (one group: ``topic,partition,offset``; several: ``group,topic,partition,offset``)."""
    broker, _ = stamped
    run = reset(broker.bootstrap, "exp", "--to-offset", "12", "--export", execute=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "stamped,0,12\n\n"
    plan = tmp_path / "plan.csv"
    plan.write_text(run.stdout)
    applied = run_tool(
        "consumer_group_command", "--bootstrap-server", broker.bootstrap, "--reset-offsets",
        "--group", "exp", "--from-file", str(plan), "--execute",
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    assert new_offset(applied) == 12
    assert describe_offset(broker.bootstrap, "exp") == "12"
    # Several groups: the group column; offsets past the log end go to the log end (Kafka's range check).
    multi = tmp_path / "multi.csv"
    multi.write_text("exp,stamped,0,5\nexp2,stamped,0,999\n")
    both = run_tool(
        "consumer_group_command", "--bootstrap-server", broker.bootstrap, "--reset-offsets",
        "--group", "exp", "--group", "exp2", "--from-file", str(multi), "--execute", "--export",
    )  # fmt: skip
    assert both.returncode == 0, both.stderr
    assert both.stdout == "exp,stamped,0,5\nexp2,stamped,0,30\n\n"

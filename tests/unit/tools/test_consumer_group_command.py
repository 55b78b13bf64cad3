"""kafka-consumer-groups' parsers of --to-datetime (Kafka's Utils.getDateTime) and --by-duration (Java's
Duration.parse), and Kafka's reset output."""

from __future__ import annotations

import io

import pytest

from pykbroker.tools.consumer_group_command import get_date_time, parse_duration_ms, print_offsets_to_reset


@pytest.mark.parametrize(
    "text",
    [
        "2020-11-10T16:51:38.198",
        "2020-11-10T16:51:38.198Z",
        "2020-11-11T00:51:38.198+08",
        "2020-11-11T00:51:38.198+0800",
        "2020-11-11T00:51:38.198+08:00",
        "2020-11-10T11:21:38.198-05:30",
    ],
)
def test_get_date_time_accepts_kafkas_formats(text):
    assert get_date_time(text) == 1605027098198


@pytest.mark.parametrize("text", ["2020-11-10 16:51:38.198", "2020-11-10T16:51:38", "2020-13-10T16:51:38.198"])
def test_get_date_time_rejects_others(text):
    with pytest.raises(ValueError):
        get_date_time(text)


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("PT0S", 0),
        ("PT20.345S", 20_345),
        ("PT15M", 900_000),
        ("PT10H", 36_000_000),
        ("P2D", 172_800_000),
        ("P2DT3H4M", 183_840_000),
        ("pt1m", 60_000),
        ("PT-6H3M", -21_420_000),
        ("-PT6H3M", -21_780_000),
        ("PT-0.5S", -500),
    ],
)
def test_parse_duration_as_java(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["P", "PT", "P1DT", "PT1.5M", "1H", "P1Y"])
def test_parse_duration_rejects_others(text):
    with pytest.raises(ValueError, match="Text cannot be parsed to a Duration"):
        parse_duration_ms(text)


def test_print_offsets_to_reset_uses_kafkas_fixed_columns():
    out = io.StringIO()
    print_offsets_to_reset("g", {("t", 1): 7, ("t", 0): 3}, out)
    assert out.getvalue() == (
        "\n" + "GROUP".ljust(30) + " " + "TOPIC".ljust(30) + " PARTITION  NEW-OFFSET     "
        "\n" + "g".ljust(30) + " " + "t".ljust(30) + " " + "0".ljust(10) + " " + "3".ljust(15)
        + "\n" + "g".ljust(30) + " " + "t".ljust(30) + " " + "1".ljust(10) + " " + "7".ljust(15) + "\n"
    )  # fmt: skip

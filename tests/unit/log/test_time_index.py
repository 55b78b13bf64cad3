"""TimeIndex: monotonic appends, lookup, truncation, reserved last slot, reload."""

import os

import pytest

from pykbroker.log.abstract_index import IndexFullError
from pykbroker.log.time_index import TimeIndex, TimestampOffset


@pytest.fixture
def index(tmp_path):
    idx = TimeIndex(str(tmp_path / "00000000000000000010.timeindex"), 10, 12 * 100)
    yield idx
    idx.close_handler()


def test_empty_lookup(index):
    assert index.lookup(5) == TimestampOffset(-1, 10)
    assert index.last_entry() == TimestampOffset(-1, 10)


def test_only_larger_timestamps_are_appended(index):
    index.maybe_append(1000, 12)
    index.maybe_append(1000, 15)  # same timestamp: ignored
    index.maybe_append(2000, 20)
    assert index.entries == 2
    with pytest.raises(ValueError):
        index.maybe_append(1500, 25)


def test_lookup(index):
    for i in range(1, 50):
        index.maybe_append(i * 100, 10 + i * 2)
    assert index.lookup(50) == (-1, 10)
    assert index.lookup(100) == (100, 12)
    assert index.lookup(1050) == (1000, 30)
    assert index.lookup(10**12) == (4900, 108)


def test_truncate_to(index):
    for i in range(1, 11):
        index.maybe_append(i * 100, 10 + i * 10)
    index.truncate_to(60)
    assert index.last_entry() == (400, 50)
    index.truncate_to(55)
    assert index.last_entry() == (400, 50)
    index.truncate_to(0)
    assert index.entries == 0 and index.last_entry() == (-1, 10)


def test_last_slot_reserved_for_roll(tmp_path):
    idx = TimeIndex(str(tmp_path / "0.timeindex"), 0, 36)
    idx.maybe_append(1, 1)
    idx.maybe_append(2, 2)
    assert idx.is_full()
    with pytest.raises(IndexFullError):
        idx.maybe_append(3, 3)
    idx.maybe_append(3, 3, skip_full_check=True)
    assert idx.entries == 3
    idx.close_handler()


def test_trim_reload_and_zero_first_entry(tmp_path):
    path = str(tmp_path / "00000000000000000000.timeindex")
    idx = TimeIndex(path, 0, 1200)
    idx.maybe_append(0, 0)  # an all-zero entry is legal in slot 0
    idx.maybe_append(500, 7)
    idx.flush()
    idx.close_handler()  # crash: untrimmed
    again = TimeIndex(path, 0, 1200)
    assert again.entries == 2 and again.last_entry() == (500, 7)
    again.sanity_check()
    again.close()
    assert os.path.getsize(path) == 24

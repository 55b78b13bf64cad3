"""OffsetIndex: append, binary-search lookup, truncation, trim and reload, zero-tail, sanity."""

import os
import struct

import pytest

from pykbroker.log.abstract_index import (
    CorruptIndexError,
    IndexFullError,
    InvalidOffsetError,
)
from pykbroker.log.offset_index import OffsetIndex, OffsetPosition


@pytest.fixture
def index(tmp_path):
    idx = OffsetIndex(str(tmp_path / "00000000000000000100.index"), 100, 8 * 1000 + 5)
    yield idx
    idx.close_handler()


def test_preallocated_rounded_down(index):
    assert index.max_entries == 1000 and os.path.getsize(index.path) == 8000 and index.entries == 0


def test_lookup_empty_and_below_first(index):
    assert index.lookup(150) == OffsetPosition(100, 0)
    index.append(110, 4096)
    assert index.lookup(105) == OffsetPosition(100, 0)


def test_lookup_largest_lower_bound(index):
    for i in range(1, 500):
        index.append(100 + 3 * i, 100 * i)
    assert index.lookup(103) == (103, 100)
    assert index.lookup(104) == (103, 100)
    assert index.lookup(100 + 3 * 250 + 2) == (100 + 750, 25000)
    assert index.lookup(10**9) == (100 + 3 * 499, 49900)
    assert index.last_offset == 100 + 3 * 499


def test_append_must_increase(index):
    index.append(105, 10)
    with pytest.raises(InvalidOffsetError):
        index.append(105, 20)


def test_full(tmp_path):
    idx = OffsetIndex(str(tmp_path / "0.index"), 0, 16)
    idx.append(1, 10)
    idx.append(2, 20)
    assert idx.is_full()
    with pytest.raises(IndexFullError):
        idx.append(3, 30)
    idx.close_handler()


def test_truncate_to(index):
    for i in range(1, 11):
        index.append(100 + 10 * i, 1000 * i)
    index.truncate_to(150)  # exact entry: removed with everything after
    assert index.entries == 4 and index.last_offset == 140
    index.truncate_to(135)  # between entries: keep those below
    assert index.entries == 3 and index.last_offset == 130
    index.truncate_to(10)
    assert index.entries == 0 and index.last_offset == 100
    index.append(101, 5)  # appending works again from scratch
    assert index.lookup(200) == (101, 5)


def test_trim_and_reload(tmp_path):
    path = str(tmp_path / "00000000000000000000.index")
    idx = OffsetIndex(path, 0, 8000)
    for i in range(1, 21):
        idx.append(i * 5, i * 4097)
    idx.close()
    assert os.path.getsize(path) == 160
    again = OffsetIndex(path, 0, 8000)
    assert again.entries == 20 and again.is_full()
    again.sanity_check()
    assert again.lookup(52) == (50, 10 * 4097)
    again.resize(8000)  # becomes appendable again
    again.append(200, 999_999)
    assert again.entries == 21 and again.lookup(10**6) == (200, 999_999)
    again.close_handler()


def test_untrimmed_file_zero_tail_is_cut(tmp_path):
    path = str(tmp_path / "00000000000000000000.index")
    idx = OffsetIndex(path, 0, 8000)
    for i in range(1, 8):
        idx.append(i * 5, i * 4097)
    idx.flush()
    idx.close_handler()  # a crash: never trimmed
    assert os.path.getsize(path) == 8000
    again = OffsetIndex(path, 0, 8000)
    assert again.entries == 7 and again.last_offset == 35
    again.close_handler()


def test_sanity_check_detects_garbage(tmp_path):
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(struct.pack(">ii", 50, 100) + struct.pack(">ii", -60, 200))
    idx = OffsetIndex(str(path), 100, 8000)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    idx.close_handler()
    path.write_bytes(b"\x00" * 12)
    idx = OffsetIndex(str(path), 100, 8000)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    idx.close_handler()


def test_reset_rebuild(index):
    for i in range(1, 11):
        index.append(100 + i, i * 10)
    index.reset()
    assert index.entries == 0 and index.max_entries == 1000
    index.append(150, 5)
    assert index.lookup(151) == (150, 5)

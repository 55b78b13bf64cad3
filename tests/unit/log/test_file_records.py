"""FileRecords: appends, header scans, slices (sendfile and in-memory), truncation."""

import os
import socket

import pytest

from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.record.file_records import (
    FileRecords,
    FileRecordsTruncatedError,
    MemoryRecordsSlice,
    iter_batch_headers,
)
from tests.unit.log.log_test_utils import make_batch


@pytest.fixture
def records(tmp_path):
    fr = FileRecords.open(str(tmp_path / "00000000000000000000.log"))
    yield fr
    fr.close_handlers()


def fill(fr, n=10, count=2, payload=100):
    sizes = []
    for i in range(n):
        sizes.append(fr.append(make_batch(i * count, count, payload, max_timestamp=100 + i)))
    return sizes


def test_append_reports_bytes_and_size(records):
    sizes = fill(records)
    assert all(s == 161 for s in sizes)
    assert records.size_in_bytes == 1610 == os.path.getsize(records.path)


def test_batches_from_reads_headers_only(records):
    fill(records, n=200)
    headers = list(records.batches_from(0))
    assert [h.base_offset for h in headers] == list(range(0, 400, 2))
    assert headers[5].position == 5 * 161 and headers[5].last_offset == 11
    assert [h.base_offset for h in records.batches_from(161 * 150)] == list(range(300, 400, 2))


def test_torn_tail_is_not_a_batch(records):
    fill(records, n=3)
    records.append(make_batch(6, 2, 100)[:90])
    assert [h.base_offset for h in records.batches_from(0)] == [0, 2, 4]
    assert [h.base_offset for h, _ in records.batches_with_data_from(0)] == [0, 2, 4]


def test_bad_length_raises(records):
    fill(records, n=1)
    records.append(b"\x00" * 80)
    with pytest.raises(CorruptRecordError):
        list(records.batches_from(0))


def test_search_for_offset_with_size(records):
    fill(records, n=10)
    found = records.search_for_offset_with_size(7, 0)
    assert found == (7, 3 * 161, 161)
    assert records.search_for_offset_with_size(100, 0) is None


def test_search_for_timestamp_and_largest_after(records):
    fill(records, n=10)
    found = records.search_for_timestamp(104, 0, 0)
    assert (found.timestamp, found.offset) == (104, 8)
    assert records.search_for_timestamp(104, 0, 9).offset == 9  # never below the starting offset
    assert records.largest_timestamp_after(0) == (109, 19, None)


def test_slice_read_bytes_and_truncate(records):
    fill(records, n=10)
    s = records.slice(161, 10_000)
    assert s.size_in_bytes == 9 * 161
    assert [b.base_offset for _, b in iter_batches(s.read_bytes())] == list(range(2, 20, 2))
    assert records.truncate_to(5 * 161) == 5 * 161
    assert records.size_in_bytes == 5 * 161
    assert [h.base_offset for h in records.batches_from(0)] == [0, 2, 4, 6, 8]


def test_big_batches_with_data(records):
    for i in range(3):
        records.append(make_batch(i, 1, 3 << 20))
    got = [(h.base_offset, len(data)) for h, data in records.batches_with_data_from(0)]
    assert got == [(0, (3 << 20) + 61), (1, (3 << 20) + 61), (2, (3 << 20) + 61)]


def test_sendfile_slice_survives_delete(records):
    fill(records, n=20)
    expected = records.read(0, records.size_in_bytes)
    s = records.slice(0, records.size_in_bytes)
    records.delete_if_exists()  # unlinked and closed: the slice still holds the descriptor
    a, b = socket.socketpair()
    try:
        a.setblocking(False)
        sent = 0
        received = bytearray()
        while sent < s.size_in_bytes:
            n = s.write_to(a, sent, 1000)
            sent += n
            received += b.recv(65536)
        while len(received) < len(expected):
            received += b.recv(65536)
        assert bytes(received) == expected
        assert s.write_to(a, sent, 1000) == 0  # nothing left
    finally:
        a.close()
        b.close()


def test_sendfile_would_block_returns_zero(records):
    fill(records, n=200, payload=4000)
    s = records.slice(0, records.size_in_bytes)
    a, b = socket.socketpair()
    try:
        a.setblocking(False)
        sent = 0
        for _ in range(1000):
            n = s.write_to(a, sent, 1 << 20)
            if n == 0:
                break
            sent += n
        assert 0 < sent < s.size_in_bytes  # the peer never read: the socket filled up
    finally:
        a.close()
        b.close()


def test_sendfile_after_truncation_raises(records):
    fill(records, n=10)
    s = records.slice(0, records.size_in_bytes)
    records.truncate_to(0)
    a, b = socket.socketpair()
    try:
        with pytest.raises(FileRecordsTruncatedError):
            s.write_to(a, 0, 1000)
    finally:
        a.close()
        b.close()


def test_rename_keeps_handle(records, tmp_path):
    fill(records, n=2)
    records.rename_to(str(tmp_path / "renamed.log.deleted"))
    records.append(make_batch(4, 2, 100))
    assert os.path.getsize(tmp_path / "renamed.log.deleted") == 3 * 161


def test_preallocate_and_trim(tmp_path):
    fr = FileRecords.open(str(tmp_path / "p.log"), init_file_size=1 << 20, preallocate=True)
    assert fr.size_in_bytes == 0 and os.path.getsize(fr.path) == 1 << 20
    fr.append(make_batch(0, 1, 10))
    assert [h.base_offset for h in fr.batches_from(0)] == [0]
    fr.close()
    assert os.path.getsize(tmp_path / "p.log") == 71


def test_iter_batch_headers_in_memory():
    buf = b"".join(make_batch(i, 1, 5) for i in range(4)) + make_batch(4, 1, 5)[:30]
    assert [h.base_offset for h in iter_batch_headers(buf)] == [0, 1, 2, 3]


def test_slice_batch_headers_and_prefix(records):
    """A share fetch reads only the headers of the batches of its slice, and answers a prefix of it."""
    fill(records, n=5)  # 5 batches of 2 records, 161 bytes each
    s = records.slice(161, 161 * 3 + 50)  # batches 1-3 and a partial 4th
    headers = list(s.batch_headers())
    assert [(h.base_offset, h.last_offset, h.position) for h in headers] == [(2, 3, 0), (4, 5, 161), (6, 7, 322)]
    p = s.prefix(headers[1].position + headers[1].size_in_bytes)
    assert p.size_in_bytes == 322 and p.read_bytes() == s.read_bytes()[:322]
    assert [(h.base_offset, h.last_offset) for h in p.batch_headers()] == [(2, 3), (4, 5)]
    mem = MemoryRecordsSlice(s.read_bytes())
    assert [h.base_offset for h in mem.batch_headers()] == [2, 4, 6]
    assert mem.prefix(161).read_bytes() == s.read_bytes()[:161]


@pytest.mark.parametrize("write", ["none", "append", "truncate"])
def test_close_syncs_only_what_changed_since_the_last_flush(tmp_path, monkeypatch, write):
    """A shutdown flushes each log then closes it: the close fsyncs a file again only if a write (append,
    truncate) came after the last flush (it synced every segment twice)."""
    fr = FileRecords.open(str(tmp_path / "00000000000000000000.log"))
    fill(fr, n=3)
    fr.flush()
    if write == "append":
        fill(fr, n=1)
    elif write == "truncate":
        fr.truncate_to(fr.size_in_bytes // 2)
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    fr.close()
    assert len(synced) == (0 if write == "none" else 1)


def test_only_a_reopened_file_is_synced_at_close_without_writes(tmp_path, monkeypatch):
    """A file created empty and never written holds nothing to sync (a new empty partition's close costs no
    fsync); a file opened from disk is synced once at close (a load may have found it unsynced)."""
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    FileRecords.open(str(tmp_path / "00000000000000000000.log")).close()
    assert synced == []
    FileRecords.open(str(tmp_path / "00000000000000000000.log"), file_already_exists=True).close()
    assert len(synced) == 1
    fr = FileRecords.open(str(tmp_path / "00000000000000000010.log"), init_file_size=1 << 16, preallocate=True)
    fr.close()
    assert len(synced) == 1 and os.path.getsize(fr.path) == 0
    fr = FileRecords.open(str(tmp_path / "00000000000000000020.log"))
    fill(fr, n=1)
    fr.close()
    assert len(synced) == 2

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.record.default_record import (
    Record,
    encode_headers,
    encode_record,
    read_records,
    scan_records,
    size_in_bytes,
)

keys = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=50)), max_size=4)
record_specs = st.lists(st.tuples(st.integers(-(2**40), 2**40), keys, keys, headers), min_size=1, max_size=30)


@given(record_specs)
def test_encode_read_scan_round_trip(specs):
    data = b"".join(encode_record(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(specs))
    records = read_records(data, len(specs), 1000, 5000)
    assert records == [Record(1000 + i, 5000 + ts, k, v, h) for i, (ts, k, v, h) in enumerate(specs)]
    scan = scan_records(data, len(specs))
    assert scan.timestamp_deltas == [ts for ts, *_ in specs]
    assert scan.offset_deltas == list(range(len(specs)))
    assert scan.null_key_indexes == [i for i, (_, k, _, _) in enumerate(specs) if k is None]
    for i, (ts, k, v, h) in enumerate(specs):
        assert size_in_bytes(i, ts, k, v, h) == len(encode_record(i, ts, k, v, h))


def test_log_append_time_overrides_record_timestamps():
    data = encode_record(0, 5, b"k", b"v") + encode_record(1, 9, b"k", b"v")
    assert [r.timestamp for r in read_records(data, 2, 0, 100, log_append_time=777)] == [777, 777]


def test_record_defaults_and_accessors():
    record = Record(3, 4, None, b"v")
    assert record.headers == [] and record.attributes == 0
    assert not record.has_key and record.has_value
    assert Record(3, 4, None, b"v") == record


def test_null_header_key_rejected():
    with pytest.raises(ValueError):
        encode_headers([(None, b"x")])


def test_header_key_bytes_accepted_and_decoded_as_text():
    data = encode_record(0, 0, None, None, [(b"caf\xc3\xa9", b"1")])
    assert read_records(data, 1, 0, 0)[0].headers == [("café", b"1")]


GOOD = encode_record(0, 0, b"key", b"value", [("h", b"v")]) + encode_record(1, 1, None, b"", None)


def corruptions():
    yield "count too high", GOOD, 3
    yield "count too low (bytes remain)", GOOD, 1
    yield "truncated", GOOD[:-1], 2
    yield "truncated inside the first record", GOOD[:5], 2
    yield "empty", b"", 1
    yield "negative count", GOOD, -1
    # key length claims more than the record holds
    yield "key past record end", b"\x0e\x00\x00\x00\x7e" + b"k" * 9, 1
    yield "key length -2", encode_record(0, 0, None, b"v").replace(b"\x01", b"\x03", 1), 1
    yield "record length shorter than fields", b"\x0a" + GOOD[1:], 2
    yield "record length 0", b"\x00" * 14, 2
    # a header count larger than the bytes left
    yield "header count too big", encode_record(0, 0, None, None)[:-1] + b"\x7e", 1
    yield "negative header count", encode_record(0, 0, None, None)[:-1] + b"\x03", 1
    yield "overlong varint", b"\xff" * 12, 1


@pytest.mark.parametrize("name, data, count", list(corruptions()), ids=[c[0] for c in corruptions()])
def test_corrupt_records_raise(name, data, count):
    with pytest.raises(CorruptRecordError):
        read_records(data, count, 0, 0)
    with pytest.raises(CorruptRecordError):
        scan_records(data, count)


@given(st.binary(max_size=200), st.integers(0, 20))
def test_random_bytes_never_decode_to_garbage(data, count):
    """Either exactly ``count`` well-typed records or CorruptRecordError, nothing else."""
    try:
        records = read_records(data, count, 0, 0)
    except CorruptRecordError:
        return
    assert len(records) == count
    for record in records:
        assert record.key is None or isinstance(record.key, bytes)
        assert record.value is None or isinstance(record.value, bytes)
        assert all(isinstance(k, str) and (v is None or isinstance(v, bytes)) for k, v in record.headers)

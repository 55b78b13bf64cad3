import gzip
import os
import random
import struct
import types
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from pykbroker.protocol.errors import CorruptRecordError, UnsupportedCompressionTypeError
from pykbroker.record import compression
from pykbroker.record.compression.snappy_compression import XERIAL_BLOCK_SIZE, XERIAL_HEADER

CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
COMPRESSED = CODECS[1:]


def big_payload() -> bytes:
    """~300 KiB mixing compressible text and random bytes: crosses lz4's 64 KiB and snappy's 32 KiB blocks."""
    return b"".join(b"record-%06d " % i * 20 + os.urandom(500) for i in range(180))


@pytest.mark.parametrize("codec_id", CODECS)
@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=5000))
def test_round_trip(codec_id, data):
    codec = compression.for_id(codec_id)
    assert codec.decompress(codec.compress(data)) == data


@pytest.mark.parametrize("codec_id", CODECS)
def test_round_trip_large_and_memoryview(codec_id):
    codec = compression.for_id(codec_id)
    data = big_payload()
    blob = codec.compress(memoryview(data))
    assert codec.decompress(memoryview(bytearray(blob))) == data


@pytest.mark.parametrize("codec_id, level", [(1, 1), (1, 9), (3, 1), (3, 17), (4, -5), (4, 19)])
def test_levels(codec_id, level):
    data = big_payload()
    codec = compression.for_id(codec_id, level)
    assert codec.level == level
    assert compression.for_id(codec_id).decompress(codec.compress(data)) == data


@pytest.mark.parametrize("codec_id, level", [(1, 10), (3, 0), (3, 18), (4, 23), (2, 1)])
def test_bad_levels(codec_id, level):
    with pytest.raises(ValueError):
        compression.for_id(codec_id, level)


def test_lookup():
    assert compression.for_name("LZ4") is compression.for_id(3)
    assert compression.for_name("uncompressed").id == compression.NONE
    assert compression.of("zstd").id == 4 and compression.of(2).name == "snappy"
    for bad in (5, 7, -1):
        with pytest.raises(UnsupportedCompressionTypeError):
            compression.for_id(bad)
    with pytest.raises(UnsupportedCompressionTypeError):
        compression.for_name("brotli")


def test_lz4_writes_kafka_frame_layout():
    blob = compression.for_id(compression.LZ4).compress(big_payload())
    assert blob[:4] == b"\x04\x22\x4d\x18"  # magic 0x184D2204, little endian
    flg, bd = blob[4], blob[5]
    assert flg == 0x60  # version 01, independent blocks, no checksums, no content size
    assert bd == 0x40  # 64 KiB max block size
    assert blob[-4:] == b"\x00\x00\x00\x00"  # end mark, no content checksum


def test_lz4_reads_other_frame_variants():
    data = big_payload()
    codec = compression.for_id(compression.LZ4)
    for kwargs in (
        dict(block_size=lz4.frame.BLOCKSIZE_MAX4MB, content_checksum=True, store_size=True),
        dict(block_checksum=True, block_linked=True),
        dict(compression_level=12),
    ):
        assert codec.decompress(lz4.frame.compress(data, **kwargs)) == data


def test_snappy_writes_xerial_framing():
    data = big_payload()
    blob = compression.for_id(compression.SNAPPY).compress(data)
    assert blob[:16] == XERIAL_HEADER == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, out = 16, []
    while pos < len(blob):
        (length,) = struct.unpack_from(">i", blob, pos)
        chunk = bytes(cramjam.snappy.decompress_raw(blob[pos + 4 : pos + 4 + length]))
        assert len(chunk) <= XERIAL_BLOCK_SIZE
        out.append(chunk)
        pos += 4 + length
    assert b"".join(out) == data and len(out) == -(-len(data) // XERIAL_BLOCK_SIZE)


def test_snappy_reads_raw_block_as_librdkafka_writes():
    data = big_payload()
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert compression.for_id(compression.SNAPPY).decompress(raw) == data


def test_snappy_ignores_xerial_version_fields():
    data = b"hello snappy" * 100
    blob = bytearray(compression.for_id(compression.SNAPPY).compress(data))
    blob[8:16] = struct.pack("<ii", 1, 1)  # written little-endian by some producers
    assert compression.for_id(compression.SNAPPY).decompress(blob) == data


def test_zstd_reads_frames_without_content_size_and_concatenated_frames():
    data = big_payload()
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    codec = compression.for_id(compression.ZSTD)
    assert codec.decompress(no_size) == data
    streamed = zstandard.ZstdCompressor().compressobj()
    blob = streamed.compress(data) + streamed.flush()
    assert codec.decompress(blob) == data
    assert codec.decompress(no_size + no_size) == data + data


def test_gzip_reads_concatenated_members_and_ignores_trailing_bytes():
    codec = compression.for_id(compression.GZIP)
    assert codec.decompress(gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"
    assert codec.decompress(gzip.compress(b"abc") + b"\x00\x00") == b"abc"


def test_gzip_rejects_raw_zlib():
    with pytest.raises(CorruptRecordError):
        compression.for_id(compression.GZIP).decompress(zlib.compress(b"abc"))


@pytest.mark.parametrize("codec_id", COMPRESSED)
def test_garbage_is_corrupt(codec_id):
    codec = compression.for_id(codec_id)
    for garbage in (b"", b"\x05", random.Random(7).randbytes(64), b"\xff" * 100):
        with pytest.raises(CorruptRecordError):
            codec.decompress(garbage)


@pytest.mark.parametrize("codec_id", COMPRESSED)
def test_truncated_is_corrupt(codec_id):
    codec = compression.for_id(codec_id)
    blob = codec.compress(big_payload())
    for cut in (len(blob) // 2, len(blob) - 1):
        with pytest.raises(CorruptRecordError):
            codec.decompress(blob[:cut])


@pytest.mark.parametrize("codec_id", CODECS)
def test_decompression_cap(codec_id):
    codec = compression.for_id(codec_id)
    data = b"\x00" * 1_000_000
    blob = codec.compress(data)
    assert codec.decompress(blob, max_output_size=len(data)) == data
    with pytest.raises(CorruptRecordError, match="exceeds the limit"):
        codec.decompress(blob, max_output_size=len(data) - 1)


def test_zstd_bomb_stops_early():
    bomb = zstandard.ZstdCompressor(level=19, write_content_size=False).compress(b"\x00" * 200_000_000)
    assert len(bomb) < 10_000
    with pytest.raises(CorruptRecordError, match="exceeds the limit"):
        compression.for_id(compression.ZSTD).decompress(bomb, max_output_size=1 << 20)


def test_decompression_limit_scales_with_max_message_bytes():
    assert compression.decompression_limit(1048588) == 64 * 1048588
    assert compression.decompression_limit(1000) == compression.DEFAULT_MAX_DECOMPRESSED_BYTES


# -- interop with kafka-python's codec module (its own framing code) ------------------------------


@pytest.fixture
def kafka_codec(monkeypatch):
    from kafka import codec

    # kafka-python takes raw snappy from python-snappy, which is not installed: give it cramjam's.
    monkeypatch.setattr(
        codec,
        "snappy",
        types.SimpleNamespace(
            compress=lambda b: bytes(cramjam.snappy.compress_raw(b)),
            decompress=lambda b: bytes(cramjam.snappy.decompress_raw(b)),
        ),
    )
    return codec


@pytest.mark.parametrize(
    "codec_id, encode, decode",
    [
        (compression.GZIP, "gzip_encode", "gzip_decode"),
        (compression.SNAPPY, "snappy_encode", "snappy_decode"),
        (compression.LZ4, "lz4_encode", "lz4_decode"),
        (compression.ZSTD, "zstd_encode", "zstd_decode"),
    ],
)
def test_kafka_python_codecs_interoperate(kafka_codec, codec_id, encode, decode):
    data = big_payload()
    ours = compression.for_id(codec_id)
    assert ours.decompress(getattr(kafka_codec, encode)(data)) == data
    assert getattr(kafka_codec, decode)(ours.compress(data)) == data


def test_kafka_python_raw_snappy(kafka_codec):
    data = big_payload()
    raw = kafka_codec.snappy_encode(data, xerial_compatible=False)
    assert compression.for_id(compression.SNAPPY).decompress(raw) == data

"""Codec 2: snappy in xerial snappy-java stream framing. Mirrors ``org.apache.kafka.common.compress.SnappyCompression``.

Kafka's Java client writes ``SnappyOutputStream`` output::

    header  8 bytes  magic b"\\x82SNAPPY\\x00"
            4 bytes  int32 BE version (1)
            4 bytes  int32 BE minimum compatible version (1)
    blocks  4 bytes  int32 BE compressed length n
            n bytes  one raw snappy block of at most 32 KiB of input

We write exactly that (32 KiB input blocks, as snappy-java's default). Reading accepts the xerial
stream (the version fields are ignored: some producers write them little-endian) and, like
snappy-java's ``SnappyInputStream``, a plain raw snappy block without the header, which is what
librdkafka produces (it compresses the whole message set as one raw block). Raw blocks come from
``cramjam``; each block's declared uncompressed length is checked against ``max_output_size``
before it is decompressed, so the cap is never overshot.
"""

from __future__ import annotations

import struct

from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.record.compression.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    SNAPPY,
    Compression,
    lazy_module,
    too_large,
)

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_VERSION = 1
XERIAL_COMPATIBLE_VERSION = 1
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", XERIAL_VERSION, XERIAL_COMPATIBLE_VERSION)
XERIAL_BLOCK_SIZE = 32 * 1024

_INT32 = struct.Struct(">i")
_cramjam = lazy_module("cramjam")


def _raw_decompress(block, budget: int, max_output_size: int) -> bytes:
    """Decompress one raw snappy block whose output must fit in ``budget`` bytes."""
    cramjam = _cramjam()
    try:
        declared = cramjam.snappy.decompress_raw_len(block)
        if declared > budget:
            raise CorruptRecordError(too_large(max_output_size))
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as e:
        raise CorruptRecordError(f"Invalid snappy data: {e}") from None


class SnappyCompression(Compression):
    """Snappy (no levels). Writes xerial framing; reads xerial framing or a raw block."""

    id = SNAPPY
    name = "snappy"
    __slots__ = ()

    def __init__(self, level: int | None = None):
        if level is not None:
            raise ValueError("snappy has no compression levels")
        super().__init__(None)

    def compress(self, data) -> bytes:
        view = memoryview(data).cast("B")
        snappy = _cramjam().snappy
        parts = [XERIAL_HEADER]
        for start in range(0, len(view), XERIAL_BLOCK_SIZE):
            block = bytes(snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
            parts.append(_INT32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)

    def decompress(self, data, max_output_size: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
        view = memoryview(data).cast("B")
        if len(view) < len(XERIAL_HEADER) or view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
            return _raw_decompress(view, max_output_size, max_output_size)
        chunks = []
        total = 0
        pos = len(XERIAL_HEADER)
        end = len(view)
        while pos < end:
            if end - pos < 4:
                raise CorruptRecordError("Truncated snappy stream: partial block length")
            (length,) = _INT32.unpack_from(view, pos)
            pos += 4
            if length < 0 or pos + length > end:
                raise CorruptRecordError(f"Invalid snappy block length {length} with {end - pos} bytes left")
            if length:
                chunk = _raw_decompress(view[pos : pos + length], max_output_size - total, max_output_size)
                total += len(chunk)
                chunks.append(chunk)
            pos += length
        return b"".join(chunks)

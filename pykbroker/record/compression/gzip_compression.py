"""Codec 1: gzip (RFC 1952 stream). Mirrors ``org.apache.kafka.common.compress.GzipCompression``.

Written as one gzip member (zlib's deflate, mtime 0). Read like Java's ``GZIPInputStream``:
concatenated members are decoded in turn, and trailing bytes that do not start another member are
ignored. A raw zlib stream is not gzip and is rejected (Java consumers could not read it).
Decompression is bounded by ``max_output_size`` through zlib's ``max_length``: at most one byte over
the cap is ever produced.
"""

from __future__ import annotations

import zlib

from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.record.compression.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, GZIP, Compression, too_large

MIN_LEVEL = 1
MAX_LEVEL = 9
DEFAULT_LEVEL = -1  # Deflater.DEFAULT_COMPRESSION (zlib's 6)
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_GZIP_MAGIC = b"\x1f\x8b"


class GzipCompression(Compression):
    """gzip with ``level`` in 1..9 (None = zlib's default, as Kafka's ``compression.gzip.level``)."""

    id = GZIP
    name = "gzip"
    __slots__ = ()

    def __init__(self, level: int | None = None):
        if level is not None and level != DEFAULT_LEVEL and not MIN_LEVEL <= level <= MAX_LEVEL:
            raise ValueError(f"gzip level {level} is outside [{MIN_LEVEL}, {MAX_LEVEL}]")
        super().__init__(level)

    def compress(self, data) -> bytes:
        compressor = zlib.compressobj(DEFAULT_LEVEL if self.level is None else self.level, zlib.DEFLATED, _GZIP_WBITS)
        return compressor.compress(data) + compressor.flush()

    def decompress(self, data, max_output_size: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
        chunks = []
        total = 0
        rest = data
        while True:
            decompressor = zlib.decompressobj(_GZIP_WBITS)
            try:
                chunk = decompressor.decompress(rest, max_output_size - total + 1)
            except zlib.error as e:
                raise CorruptRecordError(f"Invalid gzip data: {e}") from None
            total += len(chunk)
            if total > max_output_size:
                raise CorruptRecordError(too_large(max_output_size))
            chunks.append(chunk)
            if not decompressor.eof:
                raise CorruptRecordError("Truncated gzip data: the stream ends inside a member")
            rest = decompressor.unused_data
            if rest[:2] != _GZIP_MAGIC:
                break
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

"""Codec 4: Zstandard frames. Mirrors ``org.apache.kafka.common.compress.ZstdCompression``.

Written as one frame at Kafka's default level 3 (``compression.zstd.level``); the frame may carry
its content size, which every decoder accepts. Reading is streaming (``decompressobj``), so frames
without a content size (Java's ``ZstdOutputStream``, librdkafka) decode, and concatenated frames
are read in turn as zstd-jni does. A truncated frame is detected (the decoder never reaches the
frame end) and raises ``CorruptRecordError``.

Bomb guard: python-zstandard's streaming decoder has no output limit, so the input is fed in
chunks of ``max(1 KiB, max_output_size / 32768)`` bytes and the output checked after each chunk.
A zstd block expands at most ~32768 times (an RLE block: 4 bytes in, 128 KiB out), so the output is
never more than about ``2 * max_output_size`` before the cap trips.

Thread-safety: python-zstandard contexts are not safe for concurrent use, so each thread keeps its
own compressor; decompression creates a decoder per call.
"""

from __future__ import annotations

import threading

from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.record.compression.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    ZSTD,
    Compression,
    lazy_module,
    too_large,
)

MIN_LEVEL = -131072  # ZSTD_minCLevel()
MAX_LEVEL = 22
DEFAULT_LEVEL = 3
MAX_EXPANSION = 32768
_MIN_FEED = 1024
_zstd = lazy_module("zstandard")


class ZstdCompression(Compression):
    """Zstandard with ``level`` in [-131072, 22] (None = 3)."""

    id = ZSTD
    name = "zstd"
    __slots__ = ("_local",)

    def __init__(self, level: int | None = None):
        if level is not None and not MIN_LEVEL <= level <= MAX_LEVEL:
            raise ValueError(f"zstd level {level} is outside [{MIN_LEVEL}, {MAX_LEVEL}]")
        super().__init__(level)
        self._local = threading.local()

    def compress(self, data) -> bytes:
        compressor = getattr(self._local, "compressor", None)
        if compressor is None:
            compressor = _zstd().ZstdCompressor(level=DEFAULT_LEVEL if self.level is None else self.level)
            self._local.compressor = compressor
        return compressor.compress(data)

    def decompress(self, data, max_output_size: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
        view = memoryview(data).cast("B")
        feed = max(_MIN_FEED, max_output_size // MAX_EXPANSION)
        zstd = _zstd()
        decompressor = zstd.ZstdDecompressor()
        chunks = []
        total = 0
        pos = 0
        end = len(view)
        if end == 0:
            raise CorruptRecordError("Empty zstd data")
        try:
            frame = decompressor.decompressobj()
            while pos < end:
                chunk = frame.decompress(view[pos : pos + feed])
                pos = min(pos + feed, end)
                if chunk:
                    total += len(chunk)
                    if total > max_output_size:
                        raise CorruptRecordError(too_large(max_output_size))
                    chunks.append(chunk)
                if frame.eof:
                    # Bytes past the frame end: the start of another frame (zstd-jni reads on).
                    pos -= len(frame.unused_data)
                    if pos < end:
                        frame = decompressor.decompressobj()
            if not frame.eof:
                raise CorruptRecordError("Truncated zstd data: the frame does not end")
        except zstd.ZstdError as e:
            raise CorruptRecordError(f"Invalid zstd data: {e}") from None
        return b"".join(chunks)

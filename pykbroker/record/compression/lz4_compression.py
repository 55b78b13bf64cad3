"""Codec 3: LZ4 frame format. Mirrors ``org.apache.kafka.common.compress.Lz4Compression``
(``Lz4BlockOutputStream``/``Lz4BlockInputStream``).

Written as Kafka writes it: one LZ4 frame (magic ``0x184D2204``), 64 KiB maximum block size,
independent blocks (Kafka's reader rejects linked blocks), no block checksums, no content size, no
content checksum, and the correct header checksum (the "broken checksum" quirk is for magic 0
only). Reading uses liblz4's full frame decoder, so frames from librdkafka, kafka-python and Java
(any block size, checksums or content size present or not) are accepted. Decompression asks liblz4
for at most ``max_output_size + 1`` bytes, so the cap is never overshot; bytes after the end of the
first frame are ignored, as Kafka's reader stops at the end mark.

Levels follow Kafka's ``compression.lz4.level``: 1..17, default 9 = the fast compressor; any other
level selects LZ4 HC at that level.
"""

from __future__ import annotations

from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.record.compression.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    LZ4,
    Compression,
    lazy_module,
    too_large,
)

MIN_LEVEL = 1
MAX_LEVEL = 17
DEFAULT_LEVEL = 9
_lz4frame = lazy_module("lz4.frame")


class Lz4Compression(Compression):
    """LZ4 frames with 64 KiB independent blocks."""

    id = LZ4
    name = "lz4"
    __slots__ = ("_lib_level",)

    def __init__(self, level: int | None = None):
        if level is not None and not MIN_LEVEL <= level <= MAX_LEVEL:
            raise ValueError(f"lz4 level {level} is outside [{MIN_LEVEL}, {MAX_LEVEL}]")
        super().__init__(level)
        # python-lz4: 0 = the default fast compressor, >= 3 = HC at that level.
        self._lib_level = 0 if level is None or level == DEFAULT_LEVEL else max(level, 3)

    def compress(self, data) -> bytes:
        lz4frame = _lz4frame()
        return lz4frame.compress(
            data,
            compression_level=self._lib_level,
            block_size=lz4frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )

    def decompress(self, data, max_output_size: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
        decompressor = _lz4frame().LZ4FrameDecompressor()
        try:
            out = decompressor.decompress(data, max_length=max_output_size + 1)
        except RuntimeError as e:
            raise CorruptRecordError(f"Invalid lz4 data: {e}") from None
        if len(out) > max_output_size:
            raise CorruptRecordError(too_large(max_output_size))
        if not decompressor.eof:
            raise CorruptRecordError("Truncated lz4 data: the frame has no end mark")
        return out

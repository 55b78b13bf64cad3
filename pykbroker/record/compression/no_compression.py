"""Codec 0: records stored as they are. Mirrors ``org.apache.kafka.common.compress.NoCompression``."""

from __future__ import annotations

from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.record.compression.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, NONE, Compression, too_large


class NoCompression(Compression):
    """Identity codec: ``compress``/``decompress`` return ``bytes(data)``."""

    id = NONE
    name = "none"
    __slots__ = ()

    def compress(self, data) -> bytes:
        return bytes(data)

    def decompress(self, data, max_output_size: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
        if len(data) > max_output_size:
            raise CorruptRecordError(too_large(max_output_size))
        return bytes(data)

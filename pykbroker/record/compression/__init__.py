"""Record batch compression codecs, one module per codec behind one interface.

Mirrors ``org.apache.kafka.common.record.CompressionType`` (ids and names) and
``org.apache.kafka.common.compress.Compression`` (codec objects with an optional level).

    for_id(2).compress(data) -> bytes
    for_id(2).decompress(blob, max_output_size=...) -> bytes     # CorruptRecordError if invalid

``for_id``/``for_name`` return shared, immutable, thread-safe codec objects; unknown ids raise
``UnsupportedCompressionTypeError`` (UNSUPPORTED_COMPRESSION_TYPE).
"""

from __future__ import annotations

from pykbroker.protocol.errors import UnsupportedCompressionTypeError
from pykbroker.record.compression.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    GZIP,
    LZ4,
    NAMES,
    NONE,
    SNAPPY,
    ZSTD,
    Compression,
    decompression_limit,
)
from pykbroker.record.compression.gzip_compression import GzipCompression
from pykbroker.record.compression.lz4_compression import Lz4Compression
from pykbroker.record.compression.no_compression import NoCompression
from pykbroker.record.compression.snappy_compression import SnappyCompression
from pykbroker.record.compression.zstd_compression import ZstdCompression

__all__ = [
    "NONE",
    "GZIP",
    "SNAPPY",
    "LZ4",
    "ZSTD",
    "NAMES",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "Compression",
    "NoCompression",
    "GzipCompression",
    "SnappyCompression",
    "Lz4Compression",
    "ZstdCompression",
    "for_id",
    "for_name",
    "decompression_limit",
    "of",
]

_CLASSES: dict[int, type[Compression]] = {
    NONE: NoCompression,
    GZIP: GzipCompression,
    SNAPPY: SnappyCompression,
    LZ4: Lz4Compression,
    ZSTD: ZstdCompression,
}
_DEFAULTS: dict[int, Compression] = {codec_id: cls() for codec_id, cls in _CLASSES.items()}
_IDS_BY_NAME = {name: codec_id for codec_id, name in NAMES.items()}


def for_id(codec_id: int, level: int | None = None) -> Compression:
    """The codec of batch attribute id ``codec_id`` (0..4), at ``level`` (None = Kafka's default).
    Raises UnsupportedCompressionTypeError for an unknown id, ValueError for a bad level."""
    if level is None:
        codec = _DEFAULTS.get(codec_id)
        if codec is not None:
            return codec
    cls = _CLASSES.get(codec_id)
    if cls is None:
        raise UnsupportedCompressionTypeError(f"Unknown compression type id {codec_id}")
    return cls(level)


def for_name(name: str, level: int | None = None) -> Compression:
    """The codec named ``name`` (``none``, ``gzip``, ``snappy``, ``lz4``, ``zstd``; ``uncompressed``
    is accepted for ``none`` as topic configs spell it). Raises UnsupportedCompressionTypeError."""
    key = name.strip().lower()
    if key == "uncompressed":
        key = "none"
    codec_id = _IDS_BY_NAME.get(key)
    if codec_id is None:
        raise UnsupportedCompressionTypeError(f"Unknown compression name {name!r}")
    return for_id(codec_id, level)


def of(compression: int | str | Compression) -> Compression:
    """Normalise a codec given as an id, a name or a :class:`Compression` object."""
    if isinstance(compression, Compression):
        return compression
    if isinstance(compression, str):
        return for_name(compression)
    return for_id(compression)

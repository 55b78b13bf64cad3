"""The codec interface every record batch compression type implements.

Mirrors ``org.apache.kafka.common.compress.Compression`` and ``org.apache.kafka.common.record.CompressionType``:
a codec is identified by the 3-bit id stored in the batch attributes (``0 none, 1 gzip, 2 snappy,
3 lz4, 4 zstd``) and compresses the whole records section of one batch as a single blob.

Kafka streams records through a compressing ``OutputStream``; we compress and decompress whole
blobs (a batch is at most ``max.message.bytes`` on the wire), which keeps the per-record Python work
out of the codec and lets the C libraries release the GIL for the whole blob.

Decompression bombs: every ``decompress`` takes ``max_output_size`` and raises ``CorruptRecordError``
(CORRUPT_MESSAGE) as soon as the output would exceed it, without materialising much more than that
(each codec documents its own overshoot bound). Kafka has no such limit; we need one because a few
KiB of zstd can expand to GiBs. The default, :data:`DEFAULT_MAX_DECOMPRESSED_BYTES` (64 MiB), is far
above what a real producer batch holds: the Java producer sizes batches by their *estimated
compressed* size, so a 1 MiB batch of highly compressible data legitimately decompresses to tens of
MiB, which is why a tight "2 x max.message.bytes" cap would reject valid traffic. The log validator
uses :func:`decompression_limit` to scale the cap with ``max.message.bytes``.

Thread-safety: codec objects are immutable and may be shared by all threads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
# The validator allows this many times max.message.bytes of decompressed records per batch.
DECOMPRESSION_RATIO_LIMIT = 64


def decompression_limit(max_message_bytes: int) -> int:
    """Decompressed-size cap (bytes) for one batch of a topic with ``max.message.bytes`` =
    ``max_message_bytes``: ``max(64 MiB, 64 * max_message_bytes)``."""
    return max(DEFAULT_MAX_DECOMPRESSED_BYTES, DECOMPRESSION_RATIO_LIMIT * max_message_bytes)


def lazy_module(name: str) -> Callable[[], Any]:
    """A function returning the module ``name`` (e.g. ``"lz4.frame"``), imported on its first call: a broker that
    never sees a codec never loads that codec's library (issue 31, start-up time)."""
    module: Any = None

    def get() -> Any:
        nonlocal module
        if module is None:
            module = importlib.import_module(name)
        return module

    return get


class Compression:
    """One codec, optionally with a compression level. Subclasses set ``id``/``name`` and implement
    :meth:`compress` and :meth:`decompress`.

    ``compress(data)`` takes any bytes-like object and returns ``bytes``.
    ``decompress(data, max_output_size)`` returns ``bytes`` and raises ``CorruptRecordError``
    when ``data`` is not a complete, valid stream of this codec or decompresses to more than
    ``max_output_size`` bytes.
    """

    id: int = -1
    name: str = "?"
    __slots__ = ("level",)

    def __init__(self, level: int | None = None):
        self.level = level

    def compress(self, data) -> bytes:
        raise NotImplementedError

    def decompress(self, data, max_output_size: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        return isinstance(other, Compression) and other.id == self.id and other.level == self.level

    def __hash__(self) -> int:
        return hash((self.id, self.level))

    def __repr__(self) -> str:
        level = "" if self.level is None else f", level={self.level}"
        return f"{type(self).__name__}({self.name}{level})"


def too_large(max_output_size: int) -> str:
    return f"Decompressed record data exceeds the limit of {max_output_size} bytes"

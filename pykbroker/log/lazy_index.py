"""An index opened (memory-mapped) on first use, as Kafka's ``LazyIndex``.

Old segments are rarely read; mapping their indexes only when a read or a retention check needs them
keeps start-up fast and the number of mappings low. A new segment's index files are created (sized,
first blocks allocated) with the segment but mapped only when first needed: ``fresh`` marks such a
file, empty whatever its length, until it is loaded or trimmed.

Threading: ``_lock`` guards the one-time open and the path; the opened index has its own lock.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class LazyIndex(Generic[T]):
    def __init__(self, path: str, factory: Callable[..., T], fresh: bool = False):
        """``factory(path)`` opens the index; ``factory(path, fresh=True)`` for a ``fresh`` file."""
        self._lock = threading.Lock()
        self._path = path
        self._factory = factory
        self._index: T | None = None
        self._fresh = fresh

    @property
    def path(self) -> str:
        index = self._index
        return index.path if index is not None else self._path  # type: ignore[attr-defined]

    @property
    def is_loaded(self) -> bool:
        return self._index is not None

    def get(self) -> T:
        index = self._index
        if index is None:
            with self._lock:
                if self._index is None:
                    self._index = self._factory(self._path, fresh=True) if self._fresh else self._factory(self._path)
                    self._fresh = False
                index = self._index
        return index

    @property
    def is_fresh(self) -> bool:
        """Not loaded yet, and the file is a new segment's empty index."""
        return self._index is None and self._fresh

    def is_full(self) -> bool:
        index = self._index
        if index is None:
            if self._fresh:  # a new segment's empty index: not full, and not mapped for this question
                return False
            index = self.get()
        return index.is_full()  # type: ignore[attr-defined]

    def trim_to_valid_size(self) -> None:
        """Trim the file to its entries (on roll and close); a fresh file, never mapped, is emptied."""
        with self._lock:
            if self._index is None:
                if self._fresh:
                    self._truncate_fresh()
                return
        self._index.trim_to_valid_size()  # type: ignore[attr-defined]

    def _truncate_fresh(self) -> None:
        try:
            os.truncate(self._path, 0)
        except FileNotFoundError:
            pass
        self._fresh = False

    def rename_to(self, path: str) -> None:
        with self._lock:
            if self._index is not None:
                self._index.rename_to(path)  # type: ignore[attr-defined]
            elif os.path.exists(self._path):
                os.replace(self._path, path)
            self._path = path

    def update_parent_dir(self, parent: str) -> None:
        with self._lock:
            self._path = os.path.join(parent, os.path.basename(self._path))
            if self._index is not None:
                self._index.update_parent_dir(parent)  # type: ignore[attr-defined]

    def unload(self) -> None:
        """Unmap (without trimming) and forget the index; the next ``get`` maps it again."""
        with self._lock:
            index, self._index = self._index, None
            if index is not None:
                index.close_handler()  # type: ignore[attr-defined]

    def close(self) -> None:
        """Trim and unmap; a fresh file, never mapped, is emptied."""
        with self._lock:
            if self._index is None:
                if self._fresh:
                    self._truncate_fresh()
                return
        self._index.close()  # type: ignore[attr-defined]

    def close_handler(self) -> None:
        if self._index is not None:
            self._index.close_handler()  # type: ignore[attr-defined]

    def delete_if_exists(self) -> bool:
        with self._lock:
            if self._index is not None:
                return self._index.delete_if_exists()  # type: ignore[attr-defined]
            try:
                os.unlink(self._path)
                return True
            except FileNotFoundError:
                return False

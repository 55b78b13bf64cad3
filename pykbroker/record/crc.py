"""CRC-32C (Castagnoli), the checksum of record batch v2: the ``crc32c`` package's C function.

    crc32c(data, value=0) -> int     # data: any buffer; value: the running crc of the bytes before it

Start-up time (issue 31): ``import crc32c`` runs the package's ``__init__``, which asks ``importlib.metadata``
for the package's own version (a scan of every installed distribution, and the imports of ``importlib.metadata``,
``email``, ``zipfile``, ``csv`` ...) and imports its command-line module (``argparse``, ``mmap``), 10-20 ms of
every broker's and tool's start for one C function. This module loads the package's extension module
``crc32c._crc32c`` directly, under that same name (a later ``import crc32c`` reuses it); should the package's
layout ever differ, it falls back to the plain import. Either way the function is the package's own.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from types import ModuleType


def _load_extension() -> ModuleType:
    """``crc32c._crc32c`` without running ``crc32c/__init__.py``; ImportError when it cannot be found."""
    loaded = sys.modules.get("crc32c._crc32c")
    if loaded is not None:
        return loaded
    package = importlib.util.find_spec("crc32c")  # locates the package, does not run it
    if package is None or not package.submodule_search_locations:
        raise ImportError("crc32c package not found")
    spec = importlib.machinery.PathFinder.find_spec("crc32c._crc32c", list(package.submodule_search_locations))
    if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
        raise ImportError("crc32c._crc32c extension not found")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["crc32c._crc32c"] = module
    return module


try:
    crc32c = _load_extension().crc32c
except (ImportError, AttributeError):  # another layout of the package: its public import
    from crc32c import crc32c

__all__ = ["crc32c"]

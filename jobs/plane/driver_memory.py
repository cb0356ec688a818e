"""Keep the driver's resident memory close to what it actually holds.

The driver's aggregation (score columns, per-document rates, the snippets table) makes many short-lived Arrow
buffers. Arrow's default allocator on Linux (mimalloc) keeps freed pages in per-thread heaps, so the driver's RSS
grew ~1.4 KB per audited snippet while live Arrow memory was ~0.25 KB (measured on a 20k-snippet audit, see
docs/scaling.md). jemalloc with a decay of 0 gives freed pages back at once; glibc's malloc_trim returns the
heap's free tail that numpy and Python leave behind.
"""
from __future__ import annotations

import ctypes
import ctypes.util

_configured = False


def return_freed_memory() -> str:
    """Make this process's Arrow default pool one that returns freed memory to the OS (once per process). Returns
    the pool's backend name."""
    global _configured
    import pyarrow as pa

    if not _configured:
        _configured = True
        try:
            pa.set_memory_pool(pa.jemalloc_memory_pool())
            pa.jemalloc_set_decay_ms(0)
        except (NotImplementedError, AttributeError):  # a pyarrow built without jemalloc
            pa.set_memory_pool(pa.system_memory_pool())
    return pa.default_memory_pool().backend_name


def trim() -> bool:
    """Give the C heap's free memory back to the OS (glibc only; elsewhere a no-op). Call between phases."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return bool(libc and libc.malloc_trim(0))
    except (OSError, AttributeError):
        return False

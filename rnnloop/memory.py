"""The C allocator under rnnloop's arrays: glibc's malloc keeps large blocks between calls.

A kernel allocates its large arrays every call (a layer's stacked outputs, its hoisted input
products, the model's outputs) and frees them when the call returns. With its default settings,
glibc's malloc gives such blocks straight back to the system (munmap, or trimming the top of the
heap), so the next call takes them anew and page-faults on every 4 KiB page it writes: measured on
the project's 2-core machine, a GRU (16, 128, 256, 200) took 24.1 ms a call against 20.2 ms with
the blocks kept, and split over 2 threads 14.9 against 11.2 ms; an LSTM of the same size 29.9
against 26.7 and 18.0 against 14.3. onnxruntime keeps its blocks in an arena of its own.

So the first session of a process raises glibc's thresholds (mallopt): blocks up to MMAP_THRESHOLD
come from the heap and up to TRIM_THRESHOLD of free memory stays at its top. glibc only, and not
where the user has set either (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, GLIBC_TUNABLES) or
set RNNLOOP_KEEP_MALLOC=0: the cost is memory that stays with the process after a peak, up to
TRIM_THRESHOLD in each of malloc's arenas (the main one, and one per thread that allocates).
"""

from __future__ import annotations

import ctypes
import os
import threading

# glibc's mallopt parameters (malloc.h) and the values set.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest on 64-bit systems (half its 64 MiB heaps)
TRIM_THRESHOLD = 64 << 20  # what glibc's own dynamic threshold reaches at most (twice the above)
ENV = "RNNLOOP_KEEP_MALLOC"
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")

_kept: bool | None = None
_lock = threading.Lock()


def keep_large_blocks() -> bool:
    """Raise glibc's thresholds, once per process (see the module's docstring); whether they are raised."""
    global _kept
    with _lock:
        if _kept is None:
            _kept = _raise_thresholds()
        return _kept


def _raise_thresholds() -> bool:
    if os.environ.get(ENV, "1") == "0" or any(os.environ.get(k) for k in _USER_SETTINGS):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc's own function: another C library's mallopt differs
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))

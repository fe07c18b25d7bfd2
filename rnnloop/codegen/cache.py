"""On-disk compile cache: generated kernel source becomes an importable, content-addressed module.

Numba's ``cache=True`` needs a function defined in a real module file: its cache files
(``__pycache__/<module>.<func>-<line>.pyXY.nbi`` index, ``.nbc`` data) are keyed on that file, and
the pickled code refers to the module by name, so each process must register the module under the
same name before numba loads them. ``load_source`` therefore writes the source to
``cache_dir()/kernels/rnnloop_kernel_<hash>.py`` and imports it under that name.

Numba 0.68 does not survive a corrupt cache entry: a truncated or garbage ``.nbi``/``.nbc`` makes
the first call raise ``UnpicklingError``/``EOFError``, and every later compile too (saving re-reads
the index). So we wrap each dispatcher's cache: a failed load deletes the kernel's numba files,
warns and reports a miss, so numba compiles and saves afresh; a failed save only warns.

rnnloop's own numba helpers (runtime, mathfn, blas, simd: ``@njit(cache=True)`` in this package)
cache into ``cache_dir()/runtime/<folder>/`` rather than into the package's ``__pycache__``, through
a numba cache locator that ``install_runtime_locator`` registers before the first kernel loads (and
so before any helper compiles, which only a kernel calling it does). So the cache holds all of
rnnloop's compiled code, and ``rnnloop cache clear`` removes all of it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import platform
import stat
import sys
import tempfile
import threading
import time
import types
import warnings
from pathlib import Path

from . import numba_fixes, vector_width

CODEGEN_VERSION = "1"  # bump when generated code changes meaning

# rnnloop modules that generated code imports. Numba does not notice when a function a cached
# kernel calls changes in another module, so their text is part of every kernel's file name.
RUNTIME_MODULES: tuple[str, ...] = ("rnnloop.codegen.blas", "rnnloop.codegen.mathfn", "rnnloop.codegen.runtime",
                                   "rnnloop.codegen.vectors")  # (vectors: simd's and conv_rt's operations)
# Modules that only the kernels using them import (`from rnnloop.codegen import NAME as ...`): their
# text is in those kernels' names alone, so a change to one recompiles only its users.
OPTIONAL_MODULES: tuple[str, ...] = ("rnnloop.codegen.simd", "rnnloop.codegen.resize_rt", "rnnloop.codegen.conv_rt", "rnnloop.codegen.signal",
                                   "rnnloop.codegen.quant_rt", "rnnloop.codegen.pool")

_lock = threading.Lock()  # two threads loading the same source must get the same module
_warned_dirs: set[Path] = set()  # unusable cache dirs already warned about (warn once)


def cache_dir() -> Path:
    """RNNLOOP_CACHE_DIR if set, else the user's cache dir: $XDG_CACHE_HOME or ~/.cache, /rnnloop;
    on macOS ~/Library/Caches/rnnloop; on Windows %LOCALAPPDATA%/rnnloop/Cache."""
    if os.environ.get("RNNLOOP_CACHE_DIR"):
        return Path(os.environ["RNNLOOP_CACHE_DIR"]).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local"
        return Path(base) / "rnnloop" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "rnnloop"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rnnloop"


def load_source(source: str, *, label: str) -> types.ModuleType:
    """Import kernel ``source`` as a module from a content-addressed file in cache_dir()/kernels
    (or, with a warning, a private temp dir if that is unwritable); the same source gives the same
    module object within a process. ``label`` names the kernel in warnings."""
    imported = tuple(m for m in OPTIONAL_MODULES if "from {} import {} as ".format(*m.rsplit(".", 1)) in source)
    env = _environment(CODEGEN_VERSION, RUNTIME_MODULES + imported)
    name = "rnnloop_kernel_" + hashlib.sha256(f"{env}\0{source}".encode()).hexdigest()[:32]
    with _lock:
        if name in sys.modules:
            return sys.modules[name]
        install_runtime_locator()  # before the kernel imports (and compiles) rnnloop's helpers
        path = _kernels_dir() / f"{name}.py"
        data = source.encode("utf-8")
        current = None
        with contextlib.suppress(OSError):
            current = path.read_bytes()
        if current != data:  # missing, or corrupt (truncated by a crash, a full disk...)
            _write_atomic(path, data)
        else:  # mark it used: `rnnloop cache clear --older-than` removes kernels by their last use
            with contextlib.suppress(OSError):
                os.utime(path)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # before the code runs: numba's cache finds the module by name
        try:
            # Run the text in memory (== the file) rather than spec.loader.exec_module: no .pyc,
            # one cache fewer that could be corrupt.
            exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 (our own code)
        except BaseException:
            del sys.modules[name]
            raise
        for obj in vars(module).values():
            _guard_numba_cache(obj, name, label)
        return module


@functools.cache
def _environment(codegen_version: str, runtime_modules: tuple[str, ...]) -> str:
    """Everything besides the source that decides what a kernel file means, as one string."""
    import llvmlite
    import numba
    import numpy

    parts = [codegen_version, numba.__version__, llvmlite.__version__, numpy.__version__,
             platform.python_implementation(), platform.python_version(), _opt_level(), _compiled_for()]
    for module_name in runtime_modules:
        try:
            spec = importlib.util.find_spec(module_name)
            text = Path(spec.origin).read_bytes()
        except (ImportError, ValueError, AttributeError, TypeError, OSError):
            text = b"<missing>"  # not written yet (or not a file): still a stable key
        parts.append(f"{module_name}={hashlib.sha256(text).hexdigest()}")
    return "\0".join(parts)


def _compiled_for() -> str:
    """What else the machine code depends on, beyond the source, the versions and the CPU (which
    Numba's cache keys): the vector width asked of LLVM (vector_width.py), and whether AMX's tiles
    are used (amx.py: code that uses them faults in a process that did not ask Linux for them)."""
    from . import amx

    width = vector_width.preferred()
    return (f"-w{width}" if width else "") + ("-amx" if amx.AVAILABLE else "")


def _opt_level() -> str:
    """Numba's optimisation level (NUMBA_OPT: 3 unless set; the tests compile at 0). Numba's cache
    does not key code by it, so rnnloop does: code compiled at another level must never load in a
    process that runs at 3, where it would be correct but slower."""
    from numba.core import config

    return str(getattr(config.OPT, "_raw_value", config.OPT))


def _kernels_dir() -> Path:
    """cache_dir()/kernels if we can write there and in its __pycache__ (else numba silently
    caches elsewhere or nowhere), else a private temp dir."""
    wanted = cache_dir() / "kernels"
    try:
        return _writable(wanted)
    except OSError as exc:
        fallback = _writable(_fallback_dir())
        if wanted not in _warned_dirs:
            _warned_dirs.add(wanted)
            warnings.warn(f"rnnloop: cannot write compiled kernels to {wanted} ({exc}); using "
                          f"{fallback} instead; set RNNLOOP_CACHE_DIR to a writable directory",
                          RuntimeWarning, stacklevel=3)
        return fallback


def _writable(directory: Path) -> Path:
    """`directory` and its __pycache__ made (private to the user) and checked: ours alone to write,
    and writable by us."""
    _private(directory)
    _private(directory / "__pycache__")
    return directory


def _private(directory: Path) -> Path:
    """`directory` made if missing and checked: ours alone to write (see _check_private) and writable
    by us; OSError if not. Every folder from cache_dir() down is made private to the user (which
    mkdir(parents=True) would not do for the folders above `directory`)."""
    top = cache_dir()
    if directory.is_relative_to(top):
        top.parent.mkdir(parents=True, exist_ok=True)  # ~/.cache and above: as the system makes them
        made = top
        made.mkdir(mode=0o700, exist_ok=True)
        for part in directory.relative_to(top).parts:
            made = made / part
            made.mkdir(mode=0o700, exist_ok=True)
    else:  # the temp fallback
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    _check_private(directory)
    tempfile.TemporaryFile(dir=directory).close()
    return directory


def _check_private(directory: Path) -> None:
    """Numba's cache files are pickles, which run code when loaded: refuse a directory that another
    user owns or that everyone may write to (OSError, so the caller falls back to a private one)."""
    if not hasattr(os, "getuid"):  # Windows: the user's local app data is private already
        return
    st = directory.lstat()
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(f"{directory} is not a directory (a symbolic link?)")
    if st.st_uid != os.getuid():
        raise OSError(f"{directory} belongs to another user (uid {st.st_uid})")
    if st.st_mode & stat.S_IWOTH:
        raise OSError(f"{directory} is writable by every user; compiled kernels load from there as code")


def _kernel_entries(directory: Path) -> dict[str, list[Path]]:
    """rnnloop's files in a kernels directory by kernel: its source and numba's cache files for it."""
    entries: dict[str, list[Path]] = {}
    if directory.is_dir():
        files = [*directory.glob("rnnloop_kernel_*"), *(directory / "__pycache__").glob("rnnloop_kernel_*")]
        for f in sorted(files):
            entries.setdefault(f.name.split(".")[0], []).append(f)  # rnnloop_kernel_<hash>[.more]
    return entries


def _runtime_entries(directory: Path) -> dict[str, list[Path]]:
    """numba's cache files of rnnloop's own helpers by folder (one per rnnloop install: see
    _RuntimeCacheLocator)."""
    if not directory.is_dir():
        return {}
    return {d.name: sorted(f for f in d.iterdir() if f.suffix in (".nbi", ".nbc"))
            for d in sorted(directory.iterdir()) if d.is_dir()}


def _size(files: list[Path]) -> int:
    total = 0
    for f in files:
        with contextlib.suppress(OSError):  # another process removed it
            total += f.stat().st_size
    return total


def cache_info() -> dict:
    """The cache: its directory, kernels (count, numba cache files, bytes), rnnloop's own compiled
    helpers (files, bytes), and the total bytes on disk."""
    top = cache_dir()
    kernels = [f for files in _kernel_entries(top / "kernels").values() for f in files]
    runtime = [f for files in _runtime_entries(top / "runtime").values() for f in files]
    info = {"directory": str(top),
            "kernels": sum(f.suffix == ".py" for f in kernels),
            "compiled": sum(f.suffix == ".nbc" for f in kernels),
            "kernel_bytes": _size(kernels),
            "runtime": len(runtime),
            "runtime_bytes": _size(runtime)}
    info["bytes"] = info["kernel_bytes"] + info["runtime_bytes"]
    return info


def clear_cache(older_than: float | None = None) -> dict:
    """Delete cached kernels (sources and compiled code) and rnnloop's compiled helpers; with
    `older_than` (seconds), only those last used longer ago: a kernel's use is its last load (see
    load_source), the helpers' that of the last process that loaded a kernel. Returns what went: kernels,
    runtime files, bytes. Only rnnloop's own files go; a process using a kernel keeps it in memory."""
    now = time.time()
    removed = {"kernels": 0, "runtime": 0, "bytes": 0}

    def old(paths: list[Path]) -> bool:
        if older_than is None:
            return True
        stamps = []
        for p in paths:
            with contextlib.suppress(OSError):
                stamps.append(p.stat().st_mtime)
        return not stamps or now - max(stamps) > older_than

    def delete(files: list[Path]) -> int:
        count = 0
        for f in files:
            with contextlib.suppress(FileNotFoundError):  # another process cleared it first
                size = f.stat().st_size
                f.unlink()
                removed["bytes"] += size
                count += 1
        return count

    top = cache_dir()
    for files in _kernel_entries(top / "kernels").values():
        if old(files):
            delete(files)
            removed["kernels"] += any(f.suffix == ".py" for f in files)
    for folder, files in _runtime_entries(top / "runtime").items():
        if old([top / "runtime" / folder, *files]):
            removed["runtime"] += delete(files)
            with contextlib.suppress(OSError):  # not empty: a file of a process writing now
                (top / "runtime" / folder).rmdir()
    return removed


_runtime_lock = threading.Lock()
_runtime_used: set[str] = set()  # the helpers' folders this process marked used
_runtime_root: Path | None = None  # cache_dir()/runtime when the locator was installed; None before


def _is_helper_source(py_file: str) -> bool:
    """Whether `py_file` is a module of this package (rnnloop.codegen): rnnloop's own helpers."""
    return py_file.endswith(".py") and os.path.dirname(os.path.realpath(py_file)) == \
        os.path.dirname(os.path.realpath(__file__))


@functools.cache
def modules_hash(directory: Path = Path(__file__).parent) -> str:
    """A hash of the text of the modules in `directory` (by default rnnloop.codegen's, whose helpers'
    cache folder it names). Numba keys a cached function by its own file's time stamp alone, but the
    helpers inline each other's functions across modules (simd's product inlines pool's claim): a
    changed pool.py must not leave an old claim in simd's cache."""
    digest = hashlib.sha256()
    for path in sorted(directory.glob("*.py")):
        with contextlib.suppress(OSError):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


@functools.cache
def _runtime_locator_class() -> type:
    """The numba cache locator of rnnloop's own helpers (made on first use: it subclasses numba's)."""
    from numba.core import caching

    class _RuntimeCacheLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
        """numba caches the functions of rnnloop.codegen's modules in cache_dir()/runtime/<folder>, a
        folder per rnnloop install (numba's name for the package folder: `codegen_<hash of its path>`),
        text of its modules (modules_hash), BLAS library (simd's and conv_rt's compiled code calls the
        one blas.py chose, which RNNLOOP_BLAS=scipy changes), optimisation level (see _opt_level), vector
        width and use of AMX (_compiled_for). A
        cache dir that is not private or not writable leaves them to numba's next locator (the
        package's __pycache__, as before)."""

        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            folder = f"{self.get_suitable_cache_subpath(py_file)}-{modules_hash()}"
            if os.environ.get("RNNLOOP_BLAS", "") == "scipy":
                folder += "-scipy"
            folder += _compiled_for()
            level = _opt_level()
            if level != "3":
                folder += f"-O{level}"
            self._cache_path = str((_runtime_root or cache_dir() / "runtime") / folder)

        def get_cache_path(self):
            return self._cache_path

        def ensure_cache_path(self):
            if self._cache_path in _runtime_used:  # checked, and marked used, by this process already
                return
            _private(Path(self._cache_path))
            with contextlib.suppress(OSError):  # in use: see clear_cache
                os.utime(self._cache_path)
            _runtime_used.add(self._cache_path)

        @classmethod
        def from_function(cls, py_func, py_file):
            if not _is_helper_source(py_file):
                return None
            return super().from_function(py_func, py_file)

    return _RuntimeCacheLocator


def install_runtime_locator() -> None:
    """Make numba cache rnnloop's own helpers (the numba functions of rnnloop.codegen's modules:
    runtime, mathfn, blas, simd) in cache_dir()/runtime instead of the package's __pycache__.

    numba chooses a function's cache locator when it is decorated, so this registers the locator
    for modules imported later and moves the cache of helpers already imported (before they first
    compile, which only a kernel calling them does). Once per process: the helpers' folder is the
    cache dir's at that time, for modules imported later too, so that a process that then points
    RNNLOOP_CACHE_DIR elsewhere (and removes that dir) does not leave some helpers saving into a
    folder that is gone. A numba without this API (``numba.core.caching``'s
    ``CacheImpl._locator_classes``, 0.68) keeps caching as it does."""
    global _runtime_root
    with _runtime_lock:
        if _runtime_root is not None:
            return
        _runtime_root = cache_dir() / "runtime"
        numba_fixes.install()  # (before anything compiles)
        vector_width.install()
        try:
            from numba.core import caching
            from numba.core.dispatcher import Dispatcher
            impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")  # (older numba)
            locators = impl._locator_classes
            locator = _runtime_locator_class()
        except (ImportError, AttributeError):
            return
        if locator not in locators:
            locators.insert(0, locator)  # before numba's own: NUMBA_CACHE_DIR and the package's __pycache__
        for module_name in RUNTIME_MODULES + OPTIONAL_MODULES:
            module = sys.modules.get(module_name)
            for obj in list(vars(module).values()) if module else []:
                cache = getattr(obj, "_cache", None)
                if (isinstance(obj, Dispatcher) and obj.py_func.__module__ == module_name
                        and isinstance(getattr(cache, "cache_path", None), str)):
                    obj.enable_caching()  # a new cache, through the locator


@functools.cache  # one per process: mkdtemp below must not run per kernel
def _fallback_dir() -> Path:
    """A per-user directory in the temp dir, shared by our processes if only we can write to it
    (numba's .nbc files are pickles: never load them from where others can write)."""
    uid = os.getuid() if hasattr(os, "getuid") else None  # Windows: %TEMP% is already per-user
    base = Path(tempfile.gettempdir()) / f"rnnloop-{'cache' if uid is None else uid}"
    try:
        base.mkdir(mode=0o700, exist_ok=True)
        st = base.lstat()
        private = uid is None or (
            stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o022)
    except OSError:
        private = False
    return (base if private else Path(tempfile.mkdtemp(prefix="rnnloop-"))) / "kernels"


def _write_atomic(path: Path, data: bytes) -> None:
    # A temp file in the same directory, then os.replace: a process importing the file
    # concurrently sees no file or the whole file, never half of it.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _guard_numba_cache(obj: object, stem: str, label: str) -> None:
    """Make a numba dispatcher's disk cache fail soft. Relies on ``Dispatcher._cache`` with
    ``load_overload``/``save_overload``/``cache_path``, stable for years; without them this
    does nothing and numba behaves as it does on its own."""
    cache = getattr(obj, "_cache", None)
    defined_here = getattr(getattr(obj, "py_func", None), "__module__", None) == stem
    if not defined_here or not isinstance(getattr(cache, "cache_path", None), str):
        return  # not a numba function of this module, or cache=False (NullCache: no path)
    load, save = cache.load_overload, cache.save_overload

    def load_overload(sig, target_context):
        try:
            return load(sig, target_context)
        except Exception as exc:  # noqa: BLE001 - whatever is wrong with the file, drop it
            warnings.warn(f"rnnloop: numba cache of kernel {label!r} is unreadable "
                          f"({type(exc).__name__}: {exc}); deleted it and compiling again",
                          RuntimeWarning, stacklevel=2)
            for f in Path(cache.cache_path).glob(f"{stem}.*"):
                if f.suffix in (".nbi", ".nbc"):
                    with contextlib.suppress(OSError):
                        f.unlink()
            return None  # numba treats this as a miss: compiles, then saves fresh files

    def save_overload(sig, data):
        try:
            save(sig, data)
        except Exception as exc:  # noqa: BLE001 - e.g. disk full, or an index we could not delete
            warnings.warn(f"rnnloop: could not save numba cache of kernel {label!r} "
                          f"({type(exc).__name__}: {exc}); it will compile again next run",
                          RuntimeWarning, stacklevel=2)

    cache.load_overload, cache.save_overload = load_overload, save_overload

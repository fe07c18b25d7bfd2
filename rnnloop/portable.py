"""Sessions that travel: a Session pickles as its model's bytes and load options, and unpickles by
loading again, once per process.

A Session holds compiled kernels and arrays that belong to one process; what another process needs
is the model and how to load it. `Portable` is that: the model's bytes (a serialized ModelProto, or an
OpenVINO IR's .xml and .bin contents) and the load options (backend, strict, max_iterations), with a
key that hashes both. `shared(portable)` returns this process's Session for that key, loading it on
first use only: the kernels come from the local kernel cache (RNNLOOP_CACHE_DIR), so each machine
compiles a model once and each process loads it once, however many tasks it runs.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import weakref
from collections import OrderedDict
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .errors import RnnloopError

if TYPE_CHECKING:
    from .session import Session

KEEP = 8  # sessions a process keeps loaded from pickles (least recently used dropped first)

_loaded: OrderedDict[str, Session] = OrderedDict()  # key -> Session loaded here from a Portable
_known: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()  # sessions made here
_locks: dict[str, threading.Lock] = {}
_lock = threading.Lock()
loads = 0  # how many Sessions this process loaded from Portables (the tests read it on workers)


class Source:
    """What `rnnloop.load` was given, kept so that the Session can travel (a file travels as it is
    when the Session is first pickled)."""

    def __init__(self, model: Any, base_dir: str | None):
        if isinstance(model, (str, os.PathLike)):
            model = os.path.abspath(os.fspath(model))  # (a worker's current directory is not ours)
        elif isinstance(model, (bytearray, memoryview)):
            model = bytes(model)
        self.model, self.base_dir = model, base_dir


class Portable:
    """A model as bytes plus its load options: what a Session pickles as. Cheap to unpickle (nothing
    loads until `shared()` or `load()` asks), so a scheduler can hold one."""

    def __init__(self, kind: str, model: bytes, weights: bytes | None, options: dict[str, Any]):
        self.kind, self.model, self.weights = kind, model, weights  # kind: "onnx" or "openvino"
        self.options = dict(sorted(options.items()))

    def __reduce__(self):
        return Portable, (self.kind, self.model, self.weights, self.options)

    @cached_property
    def key(self) -> str:
        """A hash of the model's bytes and the load options: equal keys load equal Sessions."""
        h = hashlib.sha256(self.kind.encode())
        for part in (self.model, self.weights or b"", repr(self.options).encode()):
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
        return h.hexdigest()

    def __dask_tokenize__(self) -> str:
        return self.key

    def with_options(self, **options: Any) -> Portable:
        return Portable(self.kind, self.model, self.weights, {**self.options, **options})

    def load(self) -> Session:
        """A new Session from these bytes (see `shared` for the one this process keeps)."""
        from .session import load
        if self.kind == "onnx":
            session = load(self.model, **self.options)
        else:  # OpenVINO reads files: write them to a private folder for the time of the load
            with tempfile.TemporaryDirectory(prefix="rnnloop-ir-") as folder:
                xml = os.path.join(folder, "model.xml")
                with open(xml, "wb") as f:
                    f.write(self.model)
                with open(os.path.join(folder, "model.bin"), "wb") as f:
                    f.write(self.weights or b"")
                session = load(xml, **self.options)
            session._source = None  # (its files are gone: it travels as these bytes)
        session._portable = self
        return session


def portable(session: Session) -> Portable:
    """The Session's model as bytes plus its options (made once per Session, then kept)."""
    made = getattr(session, "_portable", None)
    if made is not None:
        return made
    options = {"backend": session.backend, "strict": session.strict,
               "max_iterations": session.options.max_iterations, "threads": session._threads_option}
    source = getattr(session, "_source", None)
    if source is not None and isinstance(source.model, str) and source.model.lower().endswith(".xml"):
        xml = source.model
        with open(xml, "rb") as f:
            model = f.read()
        with open(os.path.splitext(xml)[0] + ".bin", "rb") as f:
            weights = f.read()
        made = Portable("openvino", model, weights, options)
    else:
        made = Portable("onnx", _onnx_bytes(session, source), None, options)
    session._portable = made
    return made


def _onnx_bytes(session: Session, source: Source | None) -> bytes:
    if source is None:  # built in Python (a Network, a traced function): travels as its ONNX export
        from .export import to_onnx
        try:
            return to_onnx(session.graph).SerializeToString()
        except Exception as e:
            raise RnnloopError(f"this Session was built in Python and cannot travel: exporting its graph to "
                               f"ONNX failed ({e}); save the network with .to_onnx(path) and load that "
                               f"file instead") from e
    if isinstance(source.model, bytes) and not source.base_dir:
        return source.model  # (bytes that needed no external data: as given)
    from .frontends.onnx import read_model
    proto = read_model(source.model, source.base_dir)  # with external data, as a worker cannot read it
    try:
        return proto.SerializeToString()
    except ValueError as e:  # protobuf's 2 GB limit
        raise RnnloopError(f"the model cannot travel as one ONNX message ({e}); keep it on storage every "
                           "worker reads and load it there by path") from e


def shared(model: Portable) -> Session:
    """This process's Session for `model`: the one made here if it is still alive, else one loaded
    from the bytes on first use and kept (up to KEEP models, least recently used dropped)."""
    global loads
    key = model.key
    with _lock:
        session = _known.get(key) or _loaded.get(key)
        if session is not None:
            if key in _loaded:
                _loaded.move_to_end(key)
            return session
        lock = _locks.setdefault(key, threading.Lock())
    with lock:  # one load per key even when several threads ask at once (other keys do not wait)
        with _lock:
            session = _loaded.get(key)
        if session is None:
            session = model.load()
            with _lock:
                loads += 1
                _loaded[key] = session
                while len(_loaded) > KEEP:
                    _loaded.popitem(last=False)
    return session


def share(session: Session) -> Portable:
    """The Session's Portable, with the Session registered as this process's for it (so that
    `shared` here returns this very Session while it lives, instead of loading another)."""
    made = portable(session)
    _known[made.key] = session
    return made


def reduce(session: Session):
    """Session.__reduce__: pickle as the Portable; the unpickling process loads through `shared`."""
    return _restore, (share(session),)


def _restore(model: Portable) -> Session:
    return shared(model)

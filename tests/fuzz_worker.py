"""The child process of test_fuzz_safety.py: runs models on both backends where a crash cannot take
the test run down with it.

Requests arrive on stdin and replies leave on stdout, each a pickle behind its 8-byte length. A
request is (model, feeds), the model as ONNX bytes or as OpenVINO (xml text, weights bytes); the reply is one outcome per backend, interpreter first:
("ok", outputs), ("error", exception class, message) for an RnnloopError, or ("escaped", exception
class, message) for any other exception, which is a bug. Sessions are kept per model, so a model's
kernel compiles once however many feeds it gets.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import struct
import sys
import tempfile
import warnings
from pathlib import Path

import rnnloop

MAX_ITERATIONS = 10_000  # every fuzz loop ends well before this, unless it never ends


def outcome(call, *args, **kwargs) -> tuple:
    try:
        return ("ok", call(*args, **kwargs))
    except rnnloop.RnnloopError as e:
        return ("error", type(e).__name__, str(e))
    except Exception as e:  # noqa: BLE001 - any other exception is what the test reports
        return ("escaped", type(e).__name__, str(e))


def main() -> None:
    # Replies own the real stdout; anything else printed goes to stderr.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    warnings.simplefilter("ignore")  # NumPy's overflow and invalid-value warnings on random feeds
    with tempfile.TemporaryDirectory(prefix="rnnloop-fuzz-") as scratch:
        serve(sys.stdin.buffer, replies, Path(scratch))


def serve(requests, replies, scratch: Path) -> None:
    sessions: dict[tuple[bytes | str, str], tuple] = {}  # (model or its path, backend) -> loaded
    while header := requests.read(8):
        model, feeds = pickle.loads(requests.read(struct.unpack("<Q", header)[0]))
        if isinstance(model, tuple):  # OpenVINO IR: files on disk, named by the hash of the XML
            xml, weights = model
            path = scratch / f"{hashlib.sha256(xml.encode()).hexdigest()[:16]}.xml"
            path.write_text(xml)
            path.with_suffix(".bin").write_bytes(weights)
            model = str(path)
        reply = []
        for backend in ("interp", "numba"):
            key = (model, backend)
            if key not in sessions:
                sessions[key] = outcome(rnnloop.load, model, backend=backend, strict=True,
                                        max_iterations=MAX_ITERATIONS)
            loaded = sessions[key]
            reply.append(loaded if loaded[0] != "ok" else outcome(loaded[1].run, None, feeds))
        data = pickle.dumps(reply)
        replies.write(struct.pack("<Q", len(data)) + data)
        replies.flush()


if __name__ == "__main__":
    main()

"""The child process of the model fuzzer (test_fuzz_models.py, fuzz_campaign.py): runs one model per
request where a crash or a hang cannot take the test run down with it.

Requests arrive on stdin and replies leave on stdout, each a pickle behind its 8-byte length, as in
fuzz_worker.py. A request is (model as ONNX bytes, feeds, engine); engine "rnnloop" replies
{"interp": outcome, "numba": outcome, "fallbacks": [reason, ...]}, and engine "onnxruntime"
{"onnxruntime": outcome} (onnxruntime can die on a model too, so it gets a process of its own).

An outcome is ("ok", outputs), ("error", class, message, phase) for an RnnloopError raised at
"load" or "run", or ("escaped", class, message, phase) for any other exception. Outputs are
("tensor", array) or ("sequence", [array, ...]) or ("other", type name) each. rnnloop loads with
strict=False, so a loop the code generator cannot fuse falls back; "fallbacks" lists the reasons:
every plan that is not fused, and every FallbackWarning raised while loading or running.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
import warnings

import numpy as np

MAX_ITERATIONS = 10_000  # every generated loop ends well before this


def normalised(outputs) -> list:
    """Outputs as ("tensor", array), ("sequence", [arrays]) or ("other", type name)."""
    result = []
    for value in outputs:
        if isinstance(value, np.ndarray):
            result.append(("tensor", value))
        elif isinstance(value, list):
            result.append(("sequence", [np.asarray(v) for v in value]))
        else:
            result.append(("other", type(value).__name__))
    return result


def guarded(phase: str, call, *args, **kwargs) -> tuple:
    import rnnloop
    try:
        return ("ok", call(*args, **kwargs))
    except rnnloop.RnnloopError as e:
        return ("error", type(e).__name__, str(e), phase)
    except Exception as e:  # noqa: BLE001 - any other exception is what the fuzzer reports
        return ("escaped", type(e).__name__, str(e), phase)


def run_rnnloop(model: bytes, feeds: dict) -> dict:
    import rnnloop
    reply: dict = {"fallbacks": []}
    for backend in ("interp", "numba"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", rnnloop.FallbackWarning)
            loaded = guarded("load", rnnloop.load, model, backend=backend, max_iterations=MAX_ITERATIONS)
            result = loaded if loaded[0] != "ok" else guarded("run", loaded[1].run, None, feeds)
        if result[0] == "ok":
            result = ("ok", normalised(result[1]))
        reply[backend] = result
        if backend == "numba":
            if loaded[0] == "ok":
                for plan in getattr(loaded[1], "plans", []):
                    if getattr(plan, "fused", True) is None:
                        reply["fallbacks"].append(f"plan: {getattr(plan, 'reason', '') or plan!r}")
            reply["fallbacks"] += [f"warning: {w.message}" for w in caught
                                   if issubclass(w.category, rnnloop.FallbackWarning)]
    return reply


def run_onnxruntime(model: bytes, feeds: dict) -> dict:
    import onnx
    import onnxruntime as ort
    from model_fuzz import for_onnxruntime
    model = for_onnxruntime(onnx.load_from_string(model)).SerializeToString()
    try:
        session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        outputs = session.run(None, feeds)
    except Exception as e:  # noqa: BLE001 - onnxruntime refuses some valid models
        return {"onnxruntime": ("error", type(e).__name__, str(e), "run")}
    return {"onnxruntime": ("ok", normalised([list(o) if isinstance(o, list) else np.asarray(o) for o in outputs]))}


def main() -> None:
    # Replies own the real stdout; anything else printed goes to stderr.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    warnings.simplefilter("ignore")  # NumPy's overflow and invalid-value warnings on random values
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    requests = sys.stdin.buffer
    while header := requests.read(8):
        model, feeds, engine = pickle.loads(requests.read(struct.unpack("<Q", header)[0]))
        reply = run_onnxruntime(model, feeds) if engine == "onnxruntime" else run_rnnloop(model, feeds)
        data = pickle.dumps(reply)
        replies.write(struct.pack("<Q", len(data)) + data)
        replies.flush()


if __name__ == "__main__":
    main()

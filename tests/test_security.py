"""A model is data: nothing in it (node names, value names, attributes) becomes code that runs."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

import rnnloop

# If any of these reached generated code as code, loading or running the model would exit.
EVIL = '"""\nraise SystemExit(7)\n#'
EVIL_VALUE = "x); raise SystemExit(8); (y"


def evil_model():
    f32 = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c2"], name=EVIL),
         helper.make_node("Add", [EVIL_VALUE, EVIL_VALUE], ["x_out"], name="\\" + EVIL)],
        EVIL, [helper.make_tensor_value_info("i", TensorProto.INT64, []),
               helper.make_tensor_value_info("c", TensorProto.BOOL, []),
               helper.make_tensor_value_info(EVIL_VALUE, f32, [2])],
        [helper.make_tensor_value_info("c2", TensorProto.BOOL, []), helper.make_tensor_value_info("x_out", f32, [2])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "x0"], ["x"], body=body, name=EVIL + "\r\nraise SystemExit(9)")], EVIL,
        [helper.make_tensor_value_info("M", TensorProto.INT64, []), helper.make_tensor_value_info("x0", f32, [2])],
        [helper.make_tensor_value_info("x", f32, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_names_in_a_model_never_become_kernel_code():
    session = rnnloop.load(evil_model(), strict=True)
    x, = session.run(None, {"M": np.array(3), "x0": np.ones(2, np.float32)})
    np.testing.assert_array_equal(x, [8.0, 8.0])
    (_, source), = session.kernel_sources()
    calls = [line.strip() for line in source.splitlines() if "SystemExit(" in line]
    assert calls  # the names are shown, in comments and docstrings only, on one line each...
    assert all(line.startswith("#") or (line.startswith('"""') and line.endswith('"""')) for line in calls)
    compile(source, "kernel", "exec")  # ...and the source is still valid Python

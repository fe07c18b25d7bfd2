"""The recurrent models with convolutional and audio front ends (rnnloop.frontend_models, standing
for published ones) load and agree with onnxruntime under both backends, carry their state between
calls, and their OpenVINO IR conversions agree with OpenVINO; torch's exports of the same
architectures too, where torch is installed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import assert_same, run_onnxruntime

import rnnloop
from rnnloop.frontend_models import crnn, fsmn_stream, vad_conv

RTOL, ATOL = 1e-4, 1e-5  # float32 through different summation orders (the tolerance)

# (builder, its arguments) of each model; crnn at a narrower width to keep the tests lean.
MODELS = {"vad_conv": (vad_conv, {}), "crnn": (crnn, {"width": 40}), "fsmn_stream": (fsmn_stream, {})}
_built: dict = {}


def built(name: str):
    if name not in _built:
        builder, arguments = MODELS[name]
        _built[name] = builder(**arguments)
    return _built[name]


def load(model, backend: str) -> rnnloop.Session:
    """A session that loads without falling back: under numba, the whole model compiles."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", rnnloop.FallbackWarning)
        return rnnloop.load(model, backend=backend)


def _backends(slow_numba: bool = False):
    numba = pytest.param("numba", marks=pytest.mark.slow) if slow_numba else "numba"
    return ["interp", numba]


@pytest.mark.parametrize("name, backend", [("vad_conv", "interp"), ("vad_conv", "numba"), ("fsmn_stream", "interp"),
                                           pytest.param("fsmn_stream", "numba", marks=pytest.mark.slow)])
def test_a_streaming_model_agrees_with_onnxruntime_chunk_after_chunk(name, backend):
    model, feeds = built(name)
    session = load(model, backend)
    if backend == "numba":
        assert "interpreted" not in session.explain(), session.explain()
    rng = np.random.default_rng(7)
    state = {k: v for k, v in feeds.items() if k != "x" and k != "sr"}
    for chunk in range(3):
        step = dict(feeds, **state, x=rng.uniform(-1, 1, feeds["x"].shape).astype(np.float32))
        got = session.run(None, step)
        assert_same(got, run_onnxruntime(model, step), RTOL, ATOL)
        outputs = [o.name for o in session.get_outputs()]
        state = {k: got[outputs.index(f"{k}_out")] for k in state}  # the next call's state
    assert any(np.abs(v).max() > 0 for v in state.values())  # the state did change


def test_the_vad_at_8_khz_takes_the_other_branch():
    model, feeds = built("vad_conv")
    eight = dict(feeds, sr=np.array(8000, np.int64))
    got = rnnloop.load(model, backend="interp").run(None, eight)
    assert_same(got, run_onnxruntime(model, eight), RTOL, ATOL)
    assert not np.allclose(got[0], rnnloop.load(model, backend="interp").run(None, feeds)[0])


@pytest.mark.parametrize("backend", _backends(slow_numba=True))
def test_the_crnn_agrees_with_onnxruntime_at_two_widths_and_batches(backend):
    model, feeds = built("crnn")
    session = load(model, backend)
    for image in (feeds["image"], np.random.default_rng(3).uniform(0, 1, (2, 1, 32, 60)).astype(np.float32)):
        assert_same(session.run(None, {"image": image}), run_onnxruntime(model, {"image": image}), RTOL, ATOL)


# --------------------------------------------------------------------------------------------
# OpenVINO: the ONNX model converted by ov.convert_model and saved as IR


def _openvino_ir(model, tmp_path):
    ov = pytest.importorskip("openvino")
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    converted = ov.convert_model(str(path))
    xml = tmp_path / "model.xml"
    ov.save_model(converted, str(xml), compress_to_fp16=False)
    compiled = ov.Core().compile_model(converted, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return str(xml), compiled


@pytest.mark.slow
@pytest.mark.parametrize("name", ["vad_conv", pytest.param("fsmn_stream", marks=pytest.mark.slow),
                                  pytest.param("crnn", marks=pytest.mark.slow)])
def test_the_openvino_conversion_agrees_with_openvino(name, tmp_path):
    model, feeds = built(name)
    xml, compiled = _openvino_ir(model, tmp_path)
    expected = compiled(feeds)
    expected = [expected[port] for port in compiled.outputs]
    for backend in ("interp", "numba"):
        got = load(xml, backend).run(None, feeds)
        assert_same(got, [np.asarray(e) for e in expected], RTOL, ATOL)


# --------------------------------------------------------------------------------------------
# torch's exports of the same architectures


def _torch_export(module, args, names, tmp_path, dynamic=None):
    torch = pytest.importorskip("torch", reason="torch is not installed: its exports are not tested")
    path = tmp_path / "model.onnx"
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, str(path), input_names=names[0], output_names=names[1],
                          opset_version=17, dynamo=False, dynamic_axes=dynamic)
    return path.read_bytes()


def _torch_modules():
    torch = pytest.importorskip("torch", reason="torch is not installed: its exports are not tested")
    nn = torch.nn

    class SileroLike(nn.Module):
        """Silero VAD v5's 16 kHz path: reflect pad, Conv1d STFT, magnitude, 4 Conv1d + ReLU, LSTMCell."""

        def __init__(self):
            super().__init__()
            self.stft = nn.Conv1d(1, 258, 256, stride=128, bias=False)
            self.encoder = nn.Sequential(*[layer for c_in, c_out, s in ((129, 128, 1), (128, 64, 2), (64, 64, 2),
                                                                         (64, 128, 1))
                                           for layer in (nn.Conv1d(c_in, c_out, 3, stride=s, padding=1), nn.ReLU())])
            self.cell = nn.LSTMCell(128, 128)
            self.head = nn.Conv1d(128, 1, 1)

        def forward(self, x, state):
            x = nn.functional.pad(x.unsqueeze(1), (0, 64), mode="reflect")
            re, im = self.stft(x).chunk(2, dim=1)
            features = self.encoder(torch.sqrt(re * re + im * im))
            h, c = self.cell(features[:, :, -1], (state[0], state[1]))
            out = torch.sigmoid(self.head(torch.relu(h).unsqueeze(-1))).mean(dim=2)
            return out, torch.stack([h, c])

    class Crnn(nn.Module):
        def __init__(self):
            super().__init__()
            layers, c_in = [], 1
            for c_out, pool in ((64, (2, 2)), (128, (2, 2)), (256, None), (256, (2, 1)), (256, (2, 1))):
                layers += [nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU()]
                layers += [nn.MaxPool2d(pool, pool)] if pool else []
                c_in = c_out
            self.cnn = nn.Sequential(*layers)
            self.rnn = nn.LSTM(256, 256, num_layers=2, bidirectional=True)
            self.head = nn.Linear(512, 37)

        def forward(self, image):
            columns = self.cnn(image).amax(dim=2).permute(2, 0, 1)
            return self.head(self.rnn(columns)[0]).log_softmax(2)

    class Fsmn(nn.Module):
        def __init__(self, dim=128, order=20):
            super().__init__()
            self.inp = nn.Linear(400, dim)
            self.blocks = nn.ModuleList(nn.ModuleDict({
                "lin": nn.Linear(dim, 250), "proj": nn.Linear(250, dim, bias=False),
                "memory": nn.Conv1d(dim, dim, order, groups=dim, bias=False)}) for _ in range(4))
            self.out = nn.Linear(dim, 248)

        def forward(self, x, *caches):
            h, new = torch.relu(self.inp(x)), []
            for block, cache in zip(self.blocks, caches):
                p = block["proj"](torch.relu(block["lin"](h))).transpose(1, 2)
                history = torch.cat([cache, p], dim=2)
                h = (block["memory"](history) + p).transpose(1, 2)
                new.append(history[:, :, -cache.shape[2]:])
            return (self.out(h).softmax(2), *new)

    return torch, SileroLike, Crnn, Fsmn


def _randomise_batchnorm(torch, module):
    """BatchNorm statistics and affine terms that are not the identity (a fresh module's are)."""
    for m in module.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    return module


@pytest.mark.parametrize("name", ["silero_like", "fsmn", pytest.param("crnn", marks=pytest.mark.slow)])
def test_torch_exports_of_the_front_end_models_agree_with_onnxruntime(name, tmp_path):
    torch, SileroLike, Crnn, Fsmn = _torch_modules()
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    if name == "silero_like":
        feeds = {"x": rng.uniform(-1, 1, (1, 576)).astype(np.float32),
                 "state": rng.uniform(-1, 1, (2, 1, 128)).astype(np.float32)}
        module, names = SileroLike(), (["x", "state"], ["prob", "state_out"])
    elif name == "fsmn":
        feeds = {"x": rng.standard_normal((1, 10, 400)).astype(np.float32)}
        feeds.update({f"cache{j}": rng.standard_normal((1, 128, 19)).astype(np.float32) for j in range(4)})
        module, names = Fsmn(), (list(feeds), ["probs"] + [f"cache{j}_out" for j in range(4)])
    else:
        feeds = {"image": rng.uniform(0, 1, (1, 1, 32, 40)).astype(np.float32)}
        module, names = _randomise_batchnorm(torch, Crnn()), (["image"], ["logp"])
    model = _torch_export(module, tuple(torch.from_numpy(v) for v in feeds.values()), names, tmp_path)
    import onnx
    proto = onnx.load_from_string(model)
    expected = run_onnxruntime(proto, feeds)
    for backend in ("interp", "numba"):
        assert_same(load(model, backend).run(None, feeds), expected, RTOL, ATOL)

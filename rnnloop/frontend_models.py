"""Built-in recurrent models with the front ends published ones put before their recurrence: a
convolutional STFT voice-activity detector, a CRNN text recogniser and an FSMN streaming model.

They stand for models shipped inside Python packages today (their layer shapes, not their weights:
the weights are random, so the outputs mean nothing, but every op runs as it does in the original).
Each builder returns (model, feeds) like those of rnnloop.models, which registers them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .models import Built


def _finish(text: str, initializers: dict[str, np.ndarray]):
    from .models import _finish  # (rnnloop.models registers these builders: imported when called)
    return _finish(text, initializers)


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    scale = 1 / np.sqrt(fan_in)
    return rng.uniform(-scale, scale, shape).astype(np.float32)


def vad_conv(chunk: int = 512, hidden: int = 128, seed: int = 0) -> Built:
    """A streaming voice-activity detector in the shape of Silero VAD (v5, 16 kHz): each call takes
    one chunk of `chunk` samples after 64 samples of context carried from the last call, an If on the
    sample rate (8 kHz audio is scaled), a reflect Pad, an STFT as a Conv1d of 258 filters of width 256
    with stride 128 (the windowed cosine and sine bases), the magnitude of 129 bins, four Conv1d(3) +
    ReLU layers (129 -> 128 -> 64 -> 64 -> 128 channels, the middle two with stride 2), an LSTM(hidden)
    step whose state is carried between calls, and a ReLU, a 1x1 Conv1d and a Sigmoid head.
    Feed x[1, 64 + chunk], sr, state[2, 1, hidden]; outputs prob[1, 1] and the next state."""
    rng = np.random.default_rng(seed)
    samples, width, hop, bins = 64 + chunk, 256, 128, 129
    n = np.arange(width)[:, None]
    k = np.arange(bins)[None, :]
    window = np.hanning(width + 1)[:-1, None]  # periodic Hann, as torch.hann_window
    basis = np.concatenate([np.cos(2 * np.pi * n * k / width), -np.sin(2 * np.pi * n * k / width)], axis=1) * window
    channels = [bins, 128, 64, 64, 128]
    initializers = {
        "stft": basis.T[:, None, :].astype(np.float32),  # [258, 1, 256]
        "pads": np.array([0, 0, 0, 0, 0, 64], np.int64), "half": np.array(0.5, np.float32),
        "rate16k": np.array(16000, np.int64), "one1": np.array([1], np.int64),
        "split_bins": np.array([bins, bins], np.int64), "ones2": np.array([1, 1], np.int64),
        "W": _uniform(rng, (1, 4 * hidden, channels[-1]), hidden),
        "R": _uniform(rng, (1, 4 * hidden, hidden), hidden), "B": _uniform(rng, (1, 8 * hidden), hidden),
        "head_w": _uniform(rng, (1, hidden, 1), hidden), "head_b": np.zeros(1, np.float32)}
    layers = []
    x = "magnitude"
    for j in range(4):
        initializers[f"cw{j}"] = _uniform(rng, (channels[j + 1], channels[j], 3), 3 * channels[j])
        initializers[f"cb{j}"] = _uniform(rng, (channels[j + 1],), 3 * channels[j])
        stride = 2 if j in (1, 2) else 1
        layers.append(f"conv{j} = Conv <kernel_shape = [3], pads = [1, 1], strides = [{stride}]> ({x}, cw{j}, cb{j})")
        x = f"enc{j}"
        layers.append(f"{x} = Relu(conv{j})")
    encoder = "\n        ".join(layers)
    text = f"""
    vad_conv (float[1, {samples}] x, int64 sr, float[2, 1, {hidden}] state)
        => (float[1, 1] prob, float[2, 1, {hidden}] state_out) {{
        is16k = Equal(sr, rate16k)
        audio = If(is16k) <
            then_branch = g16 () => (float[1, {samples}] a16) {{ a16 = Identity(x) }},
            else_branch = g8 () => (float[1, {samples}] a8) {{ a8 = Mul(x, half) }}
        >
        signal = Unsqueeze(audio, one1)
        padded = Pad <mode = "reflect"> (signal, pads)
        spectrum = Conv <kernel_shape = [{width}], strides = [{hop}]> (padded, stft)
        re, im = Split <axis = 1> (spectrum, split_bins)
        re2 = Mul(re, re)
        im2 = Mul(im, im)
        power = Add(re2, im2)
        magnitude = Sqrt(power)
        {encoder}
        steps = Transpose <perm = [2, 0, 1]> ({x})
        h0, c0 = Split <axis = 0> (state, ones2)
        y, h1, c1 = LSTM <hidden_size = {hidden}> (steps, W, R, B, , h0, c0)
        state_out = Concat <axis = 0> (h1, c1)
        last = Relu(h1)
        features = Transpose <perm = [1, 2, 0]> (last)
        logit = Conv <kernel_shape = [1]> (features, head_w, head_b)
        p = Sigmoid(logit)
        prob = ReduceMean <axes = [2], keepdims = 0> (p)
    }}
    """
    feeds_rng = np.random.default_rng(seed + 1)
    feeds = {"x": feeds_rng.uniform(-1, 1, (1, samples)).astype(np.float32), "sr": np.array(16000, np.int64),
             "state": np.zeros((2, 1, hidden), np.float32)}
    return _finish(text, initializers), feeds


def crnn(batch: int = 1, height: int = 32, width: int = 100, hidden: int = 256, classes: int = 37,
         seed: int = 0) -> Built:
    """A CRNN text recogniser (Shi et al.; the shape of published OCR heads): on a greyscale image
    [batch, 1, height, width], five 3x3 Conv + BatchNormalization + ReLU blocks with MaxPools
    (1 -> 64 -> 128 -> 256 -> 256 -> 256 channels, pooled 2x2, 2x2, 2x1, 2x1: height 32 becomes 2),
    the maximum over the height, the columns as a sequence [width/4, batch, 256], two bidirectional
    LSTM(hidden) layers
    with the Transpose/Reshape glue torch exports, and a Linear head with LogSoftmax over `classes`.
    Output logp[width/4, batch, classes]."""
    rng = np.random.default_rng(seed)
    channels = [1, 64, 128, 256, 256, 256]
    pools = [(2, 2), (2, 2), None, (2, 1), (2, 1)]
    initializers: dict[str, np.ndarray] = {"flatten": np.array([0, 0, -1], np.int64)}
    lines = []
    x = "image"
    for j in range(5):
        c_in, c_out = channels[j], channels[j + 1]
        initializers.update({
            f"cw{j}": _uniform(rng, (c_out, c_in, 3, 3), 9 * c_in), f"cb{j}": _uniform(rng, (c_out,), 9 * c_in),
            f"scale{j}": rng.uniform(0.5, 1.5, c_out).astype(np.float32),
            f"shift{j}": rng.uniform(-0.2, 0.2, c_out).astype(np.float32),
            f"mean{j}": rng.uniform(-0.2, 0.2, c_out).astype(np.float32),
            f"var{j}": rng.uniform(0.5, 1.5, c_out).astype(np.float32)})
        lines += [f"conv{j} = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> ({x}, cw{j}, cb{j})",
                  f"norm{j} = BatchNormalization <epsilon = 1e-5> (conv{j}, scale{j}, shift{j}, mean{j}, var{j})",
                  f"act{j} = Relu(norm{j})"]
        x = f"act{j}"
        if pools[j]:
            kh, kw = pools[j]
            lines.append(f"pool{j} = MaxPool <kernel_shape = [{kh}, {kw}], strides = [{kh}, {kw}]> ({x})")
            x = f"pool{j}"
    lines += [f"columns = ReduceMax <axes = [2], keepdims = 0> ({x})",
              "sequence = Transpose <perm = [2, 0, 1]> (columns)"]
    x = "sequence"
    for k in range(2):
        inputs = channels[-1] if k == 0 else 2 * hidden
        initializers.update({f"W{k}": _uniform(rng, (2, 4 * hidden, inputs), hidden),
                             f"R{k}": _uniform(rng, (2, 4 * hidden, hidden), hidden),
                             f"B{k}": _uniform(rng, (2, 8 * hidden), hidden)})
        lines += [f"Y{k}, h{k}, c{k} = LSTM <direction = \"bidirectional\", hidden_size = {hidden}> ({x}, W{k}, R{k}, B{k})",
                  f"Yt{k} = Transpose <perm = [0, 2, 1, 3]> (Y{k})",
                  f"rnn{k} = Reshape(Yt{k}, flatten)"]
        x = f"rnn{k}"
    initializers.update({"head_w": _uniform(rng, (2 * hidden, classes), 2 * hidden),
                         "head_b": np.zeros(classes, np.float32)})
    lines += [f"scores = MatMul({x}, head_w)", "logits = Add(scores, head_b)",
              "logp = LogSoftmax <axis = 2> (logits)"]
    body = "\n        ".join(lines)
    steps = width // 4
    text = f"""
    crnn (float[N, 1, {height}, W] image) => (float[T, N, {classes}] logp) {{
        {body}
    }}
    """
    feeds = {"image": np.random.default_rng(seed + 1).uniform(0, 1, (batch, 1, height, width)).astype(np.float32)}
    assert steps > 0
    return _finish(text, initializers), feeds


def fsmn_stream(frames: int = 10, features: int = 400, dim: int = 128, order: int = 20, layers: int = 4,
                classes: int = 248, seed: int = 0) -> Built:
    """A streaming FSMN voice-activity model in the shape of FunASR's FSMN-VAD: each call takes
    `frames` feature frames [1, frames, features]; a Linear + ReLU input layer, then `layers` FSMN
    blocks, each a Linear(dim -> 250) + ReLU, a projection back to dim, and a memory block: a
    depthwise Conv1d of width `order` over the projection and the last order - 1 frames of the
    previous call (a cache carried between calls), added to the projection; then a Linear +
    Softmax over `classes`. Feed x and cache0..cache{layers-1} [1, dim, order - 1]; outputs the
    probabilities [1, frames, classes] and the next caches."""
    rng = np.random.default_rng(seed)
    inner = 250
    initializers: dict[str, np.ndarray] = {
        "in_w": _uniform(rng, (features, dim), features), "in_b": _uniform(rng, (dim,), features),
        "out_w": _uniform(rng, (dim, classes), dim), "out_b": np.zeros(classes, np.float32),
        "keep_from": np.array([-(order - 1)], np.int64), "keep_to": np.array([np.iinfo(np.int64).max], np.int64),
        "axis2": np.array([2], np.int64)}
    lines = ["in_p = MatMul(x, in_w)", "in_a = Add(in_p, in_b)", "h0 = Relu(in_a)"]
    caches_in, caches_out = [], []
    for j in range(layers):
        initializers.update({
            f"w{j}": _uniform(rng, (dim, inner), dim), f"b{j}": _uniform(rng, (inner,), dim),
            f"p{j}": _uniform(rng, (inner, dim), inner),
            f"memory{j}": _uniform(rng, (dim, 1, order), order)})
        lines += [f"lin{j} = MatMul(h{j}, w{j})", f"bias{j} = Add(lin{j}, b{j})", f"act{j} = Relu(bias{j})",
                  f"proj{j} = MatMul(act{j}, p{j})",
                  f"proj_t{j} = Transpose <perm = [0, 2, 1]> (proj{j})",
                  f"history{j} = Concat <axis = 2> (cache{j}, proj_t{j})",
                  f"mem{j} = Conv <group = {dim}, kernel_shape = [{order}]> (history{j}, memory{j})",
                  f"sum{j} = Add(mem{j}, proj_t{j})",
                  f"h{j + 1} = Transpose <perm = [0, 2, 1]> (sum{j})",
                  f"cache{j}_out = Slice(history{j}, keep_from, keep_to, axis2)"]
        caches_in.append(f"float[1, {dim}, {order - 1}] cache{j}")
        caches_out.append(f"float[1, {dim}, {order - 1}] cache{j}_out")
    lines += [f"o_p = MatMul(h{layers}, out_w)", "o_a = Add(o_p, out_b)", "probs = Softmax <axis = 2> (o_a)"]
    body = "\n        ".join(lines)
    text = f"""
    fsmn_stream (float[1, T, {features}] x, {", ".join(caches_in)})
        => (float[1, T, {classes}] probs, {", ".join(caches_out)}) {{
        {body}
    }}
    """
    feeds_rng = np.random.default_rng(seed + 1)
    feeds = {"x": feeds_rng.standard_normal((1, frames, features)).astype(np.float32)}
    feeds.update({f"cache{j}": np.zeros((1, dim, order - 1), np.float32) for j in range(layers)})
    return _finish(text, initializers), feeds

"""An onnx.backend.base.Backend for rnnloop, so ONNX's backend test suite can run it."""

from __future__ import annotations

from typing import Any

import onnx
from onnx.backend.base import Backend, BackendRep

from .session import Session, load


class RnnloopRep(BackendRep):
    """A prepared model: runs feeds given in the model's input order."""

    def __init__(self, session: Session):
        self.session = session

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        if isinstance(inputs, dict):
            feeds = inputs
        else:
            names = [i.name for i in self.session.get_inputs()]
            inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
            feeds = dict(zip(names, inputs))
        return tuple(self.session.run(None, feeds))


class RnnloopBackend(Backend):
    """rnnloop as an ONNX backend (CPU only)."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> RnnloopRep:
        super().prepare(model, device, **kwargs)
        return RnnloopRep(load(model, **kwargs))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


prepare = RnnloopBackend.prepare
run_model = RnnloopBackend.run_model
supports_device = RnnloopBackend.supports_device

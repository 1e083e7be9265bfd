"""Samples-style inference code (acllite's model wrapper shape) runs unchanged."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest


def classify(image: Any) -> tuple[Any, Any]:
    """The model body: a fixed linear layer and a softmax, as a host reference too."""
    weights = np.linspace(-1.0, 1.0, 12 * 5, dtype=np.float32).reshape(12, 5)
    logits = image.reshape(2, 12) @ weights
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return logits, (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)


def test_acllite_style_code_runs_unchanged(
    rt: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "classifier.om"
    rt.sim.register_model(
        path,
        inputs=[("image", (2, 3, 2, 2), "float32")],
        outputs=[("logits", (2, 5), "float32"), ("prob", (2, 5), "float32")],
        fn=classify,
        duration_us=200,
    )
    monkeypatch.setitem(sys.modules, "acl", rt)
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    sample = importlib.import_module("acllite_style")
    sample = importlib.reload(sample)  # bind this test's runtime as its ``acl``
    assert rt.init() == 0
    assert rt.rt.set_device(0) == 0
    model = sample.InferenceModel(str(path))
    rng = np.random.default_rng(7)
    for _ in range(3):
        image = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
        logits, prob = model.execute([image])
        expected = classify(image)
        np.testing.assert_allclose(logits, expected[0], rtol=1e-6)
        np.testing.assert_allclose(prob, expected[1], rtol=1e-6)
    model.destroy()
    assert rt.sim.model_objects() == {
        "models": 0,
        "model_descs": 0,
        "datasets": 0,
        "data_buffers": 0,
    }
    assert rt.rt.reset_device(0) == 0
    assert rt.finalize() == 0

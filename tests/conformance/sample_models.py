"""Model bodies for the dynamic-model samples, named by their spec files' ``"fn"``.

``test_model_samples.py`` writes a spec file per sample (the simulator's stand-in for an
``.om`` built by ATC) whose ``"fn"`` is ``sample_models:<name>``; the sample process
imports this module when it loads the model. Each body is the model's computation; the
samples check its results with the same arithmetic written out in numpy.
"""

from __future__ import annotations

from typing import Any


def scale_and_shift(x: Any) -> Any:
    """Dynamic batch: ``(-1, 16) -> (-1, 16)``."""
    return x * 2.0 + 1.0


def channel_mean(image: Any) -> tuple[Any, Any]:
    """Dynamic image size: ``(1, 3, -1, -1) -> (1, 1, -1, -1)`` and a fixed ``(1, 3)``."""
    return image.mean(axis=1, keepdims=True), image.max(axis=(2, 3))


def weighted_sum(tokens: Any, mask: Any) -> Any:
    """Dynamic dims: ``(-1, -1, 8)`` and ``(-1, -1)`` -> ``(-1, 8)``."""
    return (tokens * mask[..., None]).sum(axis=1)


def top_rows(scores: Any) -> Any:
    """Dynamic shape: the rows whose first score passes 0.5 (how many depends on the data)."""
    return scores[scores[:, 0] > 0.5]


SPECS: dict[str, dict[str, Any]] = {
    "sample_dynamic_batch.py": {
        "fn": "sample_models:scale_and_shift",
        "inputs": [["x", [-1, 16], "float32"]],
        "outputs": [["y", [-1, 16], "float32"]],
        "batch_sizes": [1, 4, 8],
    },
    "sample_dynamic_hw.py": {
        "fn": "sample_models:channel_mean",
        "inputs": [["image", [1, 3, -1, -1], "float32"]],
        "outputs": [["grey", [1, 1, -1, -1], "float32"], ["peak", [1, 3], "float32"]],
        "dynamic_hw": [[32, 32], [64, 48]],
    },
    "sample_dynamic_dims.py": {
        "fn": "sample_models:weighted_sum",
        "inputs": [["tokens", [-1, -1, 8], "float32"], ["mask", [-1, -1], "float32"]],
        "outputs": [["pooled", [-1, 8], "float32"]],
        "dynamic_dims": [[1, 16, 1, 16], [4, 32, 4, 32]],
    },
    "sample_dynamic_shape.py": {
        "fn": "sample_models:top_rows",
        "inputs": [["scores", [[1, 64], 4], "float32"]],
        "outputs": [["kept", [[0, 64], 4], "float32"]],
    },
}

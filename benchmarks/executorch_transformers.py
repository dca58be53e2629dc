"""Architectures from the ``transformers`` library, as models for ExecuTorch's benchmarks.

Each is built from ``transformers``' own model code with the tiny configuration
of `benchmarks.onnx_transformers` (hidden 32, 2 layers; random weights, seed 0;
nothing is downloaded), wrapped to return its first output: decoders (Gemma-2
with its sliding window, Phi-3, Mistral, OPT, a small Mixtral with four
experts), an encoder (DeBERTa-v2), vision models (Swin with its windows,
SegFormer, CLIP vision) and speech (Wav2Vec2). Text models read `TOKENS`
tokens, vision models a 32 x 32 image, speech 1,600 samples.

Every one exports with ``torch.export``, lowers to ExecuTorch (portable
kernels) and runs in its runtime close to eager PyTorch. `MODELS` has them in
the shape of `benchmarks.executorch_models.MODELS`.
"""

from __future__ import annotations

import torch

from benchmarks import executorch_zoo as zoo
from benchmarks.onnx_transformers import build

TOKENS = 32  # sequence length of the text models
NAMES = ("gemma2", "phi3", "mistral", "opt", "deberta-v2", "swin", "segformer", "clip-vision",
         "wav2vec2", "mixtral")


class First(torch.nn.Module):
    """A ``transformers`` model's first output alone: a tensor, whatever the output class."""

    def __init__(self, model: torch.nn.Module, names: tuple[str, ...]):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *args):
        return self.model(**dict(zip(self.names, args, strict=True)))[0]


def transformer(name: str) -> zoo.Model:
    """``name`` (one of `NAMES`) built from its configuration, seed 0, with seeded inputs."""
    model, inputs = build(name, TOKENS)
    return zoo.Model(f"hf {name}", First(model, tuple(inputs)), [tuple(inputs.values())])


MODELS = {f"hf {name}": (lambda name=name: transformer(name), False) for name in NAMES}

"""PyTorch models built in code with random weights, for ExecuTorch's memory planning.

Why in code: torchvision from the registry is a CUDA build whose C ops do not
load with the CPU torch, and no weights are needed to plan memory. Each
builder returns ``(module, example_inputs)`` with seeded weights and inputs;
``calls`` (several for a model with a KV cache) are the inputs of successive
runs. Shapes follow the published architectures at a reduced size where noted.

- `decoder`: a small pre-norm transformer decoder of our own (causal mask);
- `llama`: ExecuTorch's llama example (``executorch.examples.models.llama``),
  with or without its KV cache (mutable buffers, exported under no_grad);
- `mobilebert`: MobileBERT's bottleneck layers (24 x: bottleneck 128, four
  stacked feed-forwards, NoNorm), sequence 128;
- `deit_tiny`: DeiT-tiny (patch 16, dim 192, 12 layers, 3 heads), 224x224;
- `mobilenet_v3_small`: MobileNetV3-small (inverted residuals, squeeze-excite,
  hard-swish), 224x224;
- `lstm`: two stacked LSTM layers over 8 steps;
- `resnet18`: ResNet-18, 224x224.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


@dataclass
class Model:
    """A model to lower: the module, the inputs of each call (several: a stateful model)."""

    name: str
    module: nn.Module
    calls: list[tuple] = field(default_factory=list)
    stateful: bool = False  # mutable buffers: export under no_grad, run several calls
    dynamic_shapes: Any = None  # torch.export's, for the first call's inputs (None: static)

    @property
    def inputs(self) -> tuple:
        return self.calls[0]


# ------------------------------------------------------------------ transformers
class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, causal: bool):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5
        if self.causal:
            scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), -1e9)
        y = scores.softmax(-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int, causal: bool):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, causal)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Decoder(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int, heads: int, context: int):
        super().__init__()
        self.embed, self.pos = nn.Embedding(vocab, dim), nn.Parameter(torch.randn(context, dim))
        self.blocks = nn.Sequential(*[Block(dim, heads, 4 * dim, True) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.head(self.norm(self.blocks(self.embed(tokens) + self.pos)))


def decoder(dim: int = 64, layers: int = 2, context: int = 16, vocab: int = 128) -> Model:
    torch.manual_seed(0)
    module = Decoder(vocab, dim, layers, 4, context).eval()
    return Model(f"decoder d{dim} x{layers} ctx{context}", module,
                 [(torch.randint(0, vocab, (1, context)),)])


def llama(dim: int = 256, layers: int = 4, context: int = 128, *, kv_cache: bool = False,
          vocab: int = 512, calls: int = 3, heads: int | None = None,
          kv_heads: int | None = None, hidden: int | None = None, tokens: int | None = None,
          shared_weights: bool = False, dynamic: bool = False) -> Model:
    """ExecuTorch's llama example; with the KV cache, one token per call (``calls`` of
    them), or with ``tokens`` one prefill of that many tokens at position 0; without it
    ``tokens`` (default: the context) at once. ``heads`` defaults to ``dim / 64``,
    ``kv_heads`` (grouped-query attention) to ``heads``, ``hidden`` to the example's SwiGLU
    width. ``shared_weights``: every layer holds the first one's parameters (the graph,
    its tensors and their plan are the same; the program's constants are one layer's, so
    that LLM-sized programs fit a small machine). ``dynamic`` (with the KV cache): the
    sequence length is a ``torch.export.Dim`` up to the context (the example's
    ``enable_dynamic_shape``), called with a prefill of ``tokens`` and then single tokens."""
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    torch.manual_seed(0)
    heads = heads or max(dim // 64, 1)
    args = ModelArgs(dim=dim, n_layers=layers, n_heads=heads, n_kv_heads=kv_heads,
                     hidden_dim=hidden, vocab_size=vocab, max_seq_len=context,
                     max_context_len=context, use_kv_cache=kv_cache,
                     enable_dynamic_shape=dynamic)
    module = construct_transformer(args).eval()
    if shared_weights:
        _share_layer_weights(module)
    name = f"llama d{dim} x{layers} ctx{context}" + (" kv-cache" if kv_cache else "")
    if kv_heads and kv_heads != heads:
        name += f" gqa{heads}/{kv_heads}"
    if tokens and (kv_cache or tokens != context):
        name += f" prefill{tokens}"
    if not kv_cache:
        tokens = tokens or context
        return Model(name, module, [(torch.randint(0, vocab, (1, tokens)),)])
    if dynamic:
        prompt = torch.randint(0, vocab, (1, tokens or 1))
        steps = [(prompt, {"input_pos": torch.tensor([0])})]
        steps += [(torch.tensor([[int(t)]]), {"input_pos": torch.tensor([prompt.shape[1] + k])})
                  for k, t in enumerate(torch.randint(0, vocab, (calls - 1,)))]
        shapes = ({1: torch.export.Dim("tokens", min=1, max=context)}, {"input_pos": None})
        return Model(name + " dynamic", module, steps, stateful=True, dynamic_shapes=shapes)
    if tokens:
        prompt = torch.randint(0, vocab, (1, tokens))
        return Model(name, module, [(prompt, {"input_pos": torch.arange(tokens)})],
                     stateful=True)
    steps = [(torch.tensor([[int(t)]]), {"input_pos": torch.tensor([k])})
             for k, t in enumerate(torch.randint(0, vocab, (calls,)))]
    return Model(name, module, steps, stateful=True)


def _share_layer_weights(module: nn.Module) -> None:
    """Every layer of the transformer takes the first layer's parameters (tied)."""
    first, *rest = module.layers
    for layer in rest:
        for name, parameter in first.named_parameters():
            owner, _, leaf = name.rpartition(".")
            setattr(layer.get_submodule(owner) if owner else layer, leaf, parameter)


class NoNorm(nn.Module):
    """MobileBERT's normalisation: an elementwise scale and shift."""

    def __init__(self, dim: int):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.randn(dim)), nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return x * self.weight + self.bias


class MobileBertLayer(nn.Module):
    def __init__(self, dim: int = 512, bottleneck: int = 128, heads: int = 4, ffns: int = 4):
        super().__init__()
        self.down_in, self.down_kv = nn.Linear(dim, bottleneck), nn.Linear(dim, bottleneck)
        self.norm_in, self.norm_kv = NoNorm(bottleneck), NoNorm(bottleneck)
        self.q, self.k = nn.Linear(bottleneck, bottleneck), nn.Linear(bottleneck, bottleneck)
        self.v, self.o = nn.Linear(dim, bottleneck), nn.Linear(bottleneck, bottleneck)
        self.heads = heads
        self.ffns = nn.ModuleList(nn.Sequential(
            nn.Linear(bottleneck, 4 * bottleneck), nn.ReLU(), nn.Linear(4 * bottleneck, bottleneck))
            for _ in range(ffns))
        self.norms = nn.ModuleList(NoNorm(bottleneck) for _ in range(ffns + 1))
        self.up, self.norm_out = nn.Linear(bottleneck, dim), NoNorm(dim)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.norm_in(self.down_in(x))
        kv = self.norm_kv(self.down_kv(x))
        def split(y):
            return y.view(b, t, self.heads, -1).transpose(1, 2)
        q, k, v = split(self.q(kv)), split(self.k(kv)), split(self.v(x))
        scores = (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).softmax(-1)
        h = self.norms[0](self.o((scores @ v).transpose(1, 2).reshape(b, t, -1)) + h)
        for ffn, norm in zip(self.ffns, self.norms[1:], strict=True):
            h = norm(ffn(h) + h)
        return self.norm_out(self.up(h) + x)


class MobileBert(nn.Module):
    def __init__(self, layers: int, vocab: int = 1024, dim: int = 512, context: int = 128):
        super().__init__()
        self.embed = nn.Embedding(vocab, 128)
        self.project = nn.Linear(3 * 128, dim)
        self.pos = nn.Parameter(torch.randn(context, dim))
        self.layers = nn.Sequential(*[MobileBertLayer(dim) for _ in range(layers)])
        self.pool = nn.Linear(dim, dim)

    def forward(self, tokens):
        e = self.embed(tokens)  # MobileBERT's trigram embedding: neighbours concatenated
        e = torch.cat([nn.functional.pad(e[:, 1:], (0, 0, 0, 1)), e,
                       nn.functional.pad(e[:, :-1], (0, 0, 1, 0))], dim=-1)
        h = self.layers(self.project(e) + self.pos)
        return torch.tanh(self.pool(h[:, 0]))


def mobilebert(layers: int = 24, context: int = 128) -> Model:
    torch.manual_seed(0)
    return Model(f"mobilebert x{layers}", MobileBert(layers, context=context).eval(),
                 [(torch.randint(0, 1024, (1, context)),)])


class Deit(nn.Module):
    def __init__(self, dim: int = 192, layers: int = 12, heads: int = 3, image: int = 224):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 16, 16)
        tokens = (image // 16) ** 2 + 2  # class and distillation tokens
        self.cls, self.pos = nn.Parameter(torch.randn(1, 2, dim)), nn.Parameter(
            torch.randn(1, tokens, dim))
        self.blocks = nn.Sequential(*[Block(dim, heads, 4 * dim, False) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, 1000)

    def forward(self, image):
        x = self.patch(image).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


def deit_tiny(layers: int = 12, image: int = 224) -> Model:
    torch.manual_seed(0)
    return Model(f"deit-tiny x{layers}", Deit(layers=layers, image=image).eval(),
                 [(torch.randn(1, 3, image, image),)])


# ------------------------------------------------------------------ convolutional
def _conv(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act=nn.ReLU):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act()) if act is not None else nn.Sequential(*layers)


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        squeeze = max(8, channels // 4)
        self.fc = nn.Sequential(nn.Conv2d(channels, squeeze, 1), nn.ReLU(),
                                nn.Conv2d(squeeze, channels, 1), nn.Hardsigmoid())

    def forward(self, x):
        return x * self.fc(x.mean((2, 3), keepdim=True))


class InvertedResidual(nn.Module):
    def __init__(self, cin, k, expand, cout, se, act, stride):
        super().__init__()
        layers = [] if expand == cin else [_conv(cin, expand, 1, act=act)]
        layers += [_conv(expand, expand, k, stride, expand, act=act)]
        layers += [SqueezeExcite(expand)] if se else []
        layers += [_conv(expand, cout, 1, act=None)]
        self.body, self.residual = nn.Sequential(*layers), stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


MOBILENET_V3_SMALL = [  # kernel, expansion, out, squeeze-excite, hard-swish, stride
    (3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2), (3, 88, 24, False, False, 1),
    (5, 96, 40, True, True, 2), (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
    (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1), (5, 288, 96, True, True, 2),
    (5, 576, 96, True, True, 1), (5, 576, 96, True, True, 1),
]


def mobilenet_v3_small(image: int = 224) -> Model:
    torch.manual_seed(0)
    layers, cin = [_conv(3, 16, 3, 2, act=nn.Hardswish)], 16
    for k, expand, cout, se, hs, stride in MOBILENET_V3_SMALL:
        layers.append(InvertedResidual(cin, k, expand, cout, se,
                                       nn.Hardswish if hs else nn.ReLU, stride))
        cin = cout
    layers += [_conv(cin, 576, 1, act=nn.Hardswish), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
               nn.Linear(576, 1024), nn.Hardswish(), nn.Linear(1024, 1000)]
    return Model("mobilenet-v3-small", nn.Sequential(*layers).eval(),
                 [(torch.randn(1, 3, image, image),)])


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(_conv(cin, cout, 3, stride), _conv(cout, cout, 3, act=None))
        self.skip = _conv(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout \
            else nn.Identity()

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


def resnet18(image: int = 224) -> Model:
    torch.manual_seed(0)
    layers, cin = [_conv(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1)], 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return Model("resnet-18", nn.Sequential(*layers).eval(), [(torch.randn(1, 3, image, image),)])


class Lstm(nn.Module):
    def __init__(self, features: int, hidden: int, layers: int):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.head(self.lstm(x)[0][:, -1])


def lstm(features: int = 16, hidden: int = 32, layers: int = 2, steps: int = 8) -> Model:
    torch.manual_seed(0)
    return Model(f"lstm {layers}x{hidden}", Lstm(features, hidden, layers).eval(),
                 [(torch.randn(1, steps, features),)])

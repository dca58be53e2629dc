"""Small models built with ``tvm.relax.frontend.nn``, exported as Relax modules.

Each `Model` gives its ``nn.Module`` and input specs; `export` turns it into
a Relax ``IRModule`` as a new user would (``export_tvm``, then the zero
pipeline: legalized and fused), optionally with the weight transforms lifted
into ``forward_transform_params`` (``LiftTransformParams``, as MLC-LLM
compiles), and optionally its kernels scheduled for CPU (`cpu_schedule`). A
symbolic sequence length gets its ``tir_var_upper_bound``. Weights are random
at run time: only memory, bit-identity and latency are measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import tvm
from tvm import relax, s_tir, tirx
from tvm.relax.frontend import nn
from tvm.s_tir import dlight


class MLP(nn.Module):
    def __init__(self, sizes=(784, 1024, 1024, 10)):
        pairs = zip(sizes, sizes[1:], strict=False)
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in pairs])

    def forward(self, x):
        for k, layer in enumerate(self.layers):
            x = layer(x)
            x = nn.op.relu(x) if k < len(self.layers) - 1 else x
        return x


class CNN(nn.Module):
    def __init__(self, channels=(3, 16, 32, 32, 64)):
        self.convs = nn.ModuleList([nn.Conv2D(a, b, 3, padding=1)
                                    for a, b in zip(channels, channels[1:], strict=False)])

    def forward(self, x):
        for conv in self.convs:
            x = nn.op.relu(conv(x))
        return x


class Attention(nn.Module):
    """Multi-head attention; ``kv_heads`` < ``heads``: grouped-query (GQA)."""

    def __init__(self, d, heads, kv_heads=None, bias=True):
        self.d, self.heads, self.kv_heads = d, heads, kv_heads or heads
        self.head = d // heads
        self.q = nn.Linear(d, d, bias=bias)
        self.k = nn.Linear(d, self.kv_heads * self.head, bias=bias)
        self.v = nn.Linear(d, self.kv_heads * self.head, bias=bias)
        self.o = nn.Linear(d, d, bias=bias)

    def forward(self, x):
        b, s = x.shape[0], x.shape[1]

        def heads(t, n):
            t = nn.op.reshape(t, (b, s, n, self.head))
            if n != self.heads:
                t = nn.op.repeat(t, self.heads // n, axis=2)
            return nn.op.permute_dims(t, (0, 2, 1, 3))

        q, k, v = heads(self.q(x), self.heads), heads(self.k(x), self.kv_heads), \
            heads(self.v(x), self.kv_heads)
        scores = nn.op.matmul(q, nn.op.permute_dims(k, (0, 1, 3, 2)))
        p = nn.op.softmax(scores * (1 / math.sqrt(self.head)), axis=-1)
        out = nn.op.permute_dims(nn.op.matmul(p, v), (0, 2, 1, 3))
        return self.o(nn.op.reshape(out, (b, s, self.d)))


class Block(nn.Module):
    """Pre-LN transformer block (GELU MLP), or Llama-style (RMSNorm, SiLU-gated MLP, GQA)."""

    def __init__(self, d, heads, ffn, kv_heads=None, llama=False):
        self.llama = llama
        norm = (lambda: nn.RMSNorm(d, -1, bias=False)) if llama else (lambda: nn.LayerNorm(d))
        self.norm1, self.norm2 = norm(), norm()
        self.attn = Attention(d, heads, kv_heads, bias=not llama)
        self.up = nn.Linear(d, ffn, bias=not llama)
        self.gate = nn.Linear(d, ffn, bias=False) if llama else None
        self.down = nn.Linear(ffn, d, bias=not llama)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        h = self.norm2(x)
        h = nn.op.silu(self.gate(h)) * self.up(h) if self.llama else nn.op.gelu(self.up(h))
        return x + self.down(h)


class Decoder(nn.Module):
    """Token embedding, ``layers`` blocks, a final norm and the vocabulary head."""

    def __init__(self, layers, d, heads, ffn, vocab, kv_heads=None, llama=True):
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d, heads, ffn, kv_heads, llama)
                                     for _ in range(layers)])
        self.norm = nn.RMSNorm(d, -1, bias=False) if llama else nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


class Blocks(nn.Module):
    """``layers`` pre-LN blocks on activations (no embedding)."""

    def __init__(self, layers, d, heads, ffn):
        self.blocks = nn.ModuleList([Block(d, heads, ffn) for _ in range(layers)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class ViT(nn.Module):
    """Patch embedding (a strided convolution), pre-LN blocks, mean pooling, a head."""

    def __init__(self, image=64, patch=8, d=192, heads=3, layers=4, classes=100):
        self.d, self.tokens = d, (image // patch) ** 2
        self.patch = nn.Conv2D(3, d, patch, stride=patch)
        self.blocks = nn.ModuleList([Block(d, heads, 4 * d) for _ in range(layers)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.patch(x)
        x = nn.op.permute_dims(nn.op.reshape(x, (x.shape[0], self.d, self.tokens)), (0, 2, 1))
        for block in self.blocks:
            x = block(x)
        return self.head(nn.op.mean(self.norm(x), axis=1) if hasattr(nn.op, "mean")
                         else nn.op.sum(self.norm(x), axis=1) * (1 / self.tokens))


@dataclass
class Model:
    """A model to export: its module, its input (shape with symbolic names, dtype)."""

    name: str
    module: nn.Module
    shape: tuple  # the input's shape; a str is a symbolic dimension
    dtype: str = "float32"
    upper: dict[str, int] = field(default_factory=dict)  # tir_var_upper_bound
    lifted: bool = False  # weight transforms lifted into forward_transform_params
    scheduled: bool = False  # kernels scheduled for CPU (`cpu_schedule`)


def export(model: Model) -> tvm.IRModule:
    """``model`` as a Relax module after the zero pipeline (see the module docstring)."""
    spec = {"forward": {"x": nn.spec.Tensor(model.shape, model.dtype)}}
    mod, _ = model.module.export_tvm(spec)
    if model.upper:
        mod["forward"] = mod["forward"].with_attr("tir_var_upper_bound", model.upper)
    if model.lifted:
        mod = relax.transform.LiftTransformParams()(mod)
    mod = relax.get_pipeline("zero")(mod)
    return cpu_schedule(mod) if model.scheduled else mod


def cpu_schedule(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with its kernels scheduled for CPU, as a build pipeline would before
    Relax's: dlight's CPU rules (GEMV; norms and softmax) and `_matmul` (dlight has no CPU
    matmul rule). Unscheduled, a d-2048 decoder's forward at 16 tokens takes 30 s;
    scheduled, under one. Both builds of a benchmark get the same module."""
    with tvm.target.Target("llvm"):
        return dlight.ApplyDefaultSchedule(_matmul, dlight.cpu.GEMV(),
                                           dlight.cpu.Reduction())(mod)


@dlight.ScheduleRule.from_callable("CPUMatmul")
def _matmul(func, target, tunable):
    """A kernel's matmul-like blocks (spatial loops, then one reduction loop, as legalized)
    with the reduction loop moved outside the last spatial loop: the naive order strides
    through the weight once per product. That loop is split into vectorized tiles of 64
    or 16 when its extent is a constant multiple; the loops outside run in parallel.
    None when the kernel has no such block."""
    sch = s_tir.Schedule(func)
    scheduled = False
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        kinds = [v.iter_type for v in sch.get(block).iter_vars]
        loops = sch.get_loops(block)
        if len(kinds) < 3 or len(loops) != len(kinds) or kinds[-1] != tirx.IterVar.CommReduce \
                or any(k != tirx.IterVar.DataPar for k in kinds[:-1]):
            continue
        *outer, i, j, k = loops
        extent = sch.get(j).extent
        if isinstance(extent, tirx.IntImm) and extent.value % 16 == 0:
            tile_outer, tile = sch.split(j, [None, 64 if extent.value % 64 == 0 else 16])
            sch.reorder(*outer, tile_outer, i, k, tile)
            sch.parallel(sch.fuse(*outer, tile_outer))
            sch.vectorize(tile)
        else:
            sch.reorder(k, j)
            if outer:
                sch.parallel(sch.fuse(*outer))
        scheduled = True
    return sch if scheduled else None


def mlp() -> Model:
    return Model("MLP 784-1024-1024-10, batch 8", MLP(), (8, 784))


def cnn() -> Model:
    return Model("CNN, 4 convs, 32x32", CNN(), (1, 3, 32, 32))


def block(lifted=False, d=256, seq=128) -> Model:
    return Model(f"pre-LN transformer block, d {d}, seq {seq}" + (" (lifted)" if lifted else ""),
                 Blocks(1, d, 4, 4 * d), (1, seq, d), lifted=lifted)


def decoder(lifted=False, layers=2, d=256, seq=128) -> Model:
    return Model(f"{layers}-block decoder, seq {seq}" + (" (lifted)" if lifted else ""),
                 Blocks(layers, d, 4, 4 * d), (1, seq, d), lifted=lifted)


def llama(lifted=False, layers=4, d=256, heads=8, kv_heads=2, ffn=688, vocab=1000,
          seq=256, scheduled=False) -> Model:
    return Model(f"{layers}-layer Llama-style decoder, d {d}, symbolic seq <= {seq}"
                 + (" (lifted)" if lifted else "") + (" (CPU schedules)" if scheduled else ""),
                 Decoder(layers, d, heads, ffn, vocab, kv_heads), (1, "seq"), "int32",
                 {"seq": seq}, lifted, scheduled)


def vit(lifted=False) -> Model:
    return Model("ViT, 64x64, patch 8, d 192, 4 blocks" + (" (lifted)" if lifted else ""),
                 ViT(), (1, 3, 64, 64), lifted=lifted)


# ------------------------------------------------------------------ transformers' model code
def transformers_models() -> list[tuple[str, callable]]:
    """Architectures of ``transformers`` (their own model code, tiny configs, random
    weights, nothing downloaded), each as (name, a function exporting it)."""
    return [("BERT (transformers), 4 layers, d 128, seq 64", _bert),
            ("ViT (transformers), 4 layers, d 128, 64x64, patch 8", _vit),
            ("CLIP vision (transformers), 4 layers, d 128, 64x64, patch 8", _clip_vision)]


def _bert() -> tvm.IRModule:
    import torch
    import transformers

    config = transformers.BertConfig(num_hidden_layers=4, hidden_size=128,
                                     num_attention_heads=4, intermediate_size=512,
                                     vocab_size=1000, max_position_embeddings=64)
    return from_torch(transformers.BertModel(config), torch.randint(0, 1000, (1, 64)))


def _vit() -> tvm.IRModule:
    import torch
    import transformers

    config = transformers.ViTConfig(num_hidden_layers=4, hidden_size=128, num_attention_heads=4,
                                    intermediate_size=512, image_size=64, patch_size=8)
    return from_torch(transformers.ViTModel(config), torch.randn(1, 3, 64, 64))


def _clip_vision() -> tvm.IRModule:
    import torch
    import transformers

    config = transformers.CLIPVisionConfig(num_hidden_layers=4, hidden_size=128,
                                           num_attention_heads=4, intermediate_size=512,
                                           image_size=64, patch_size=8)
    return from_torch(transformers.CLIPVisionModel(config), torch.randn(1, 3, 64, 64))


def from_torch(model, example) -> tvm.IRModule:
    """A ``transformers`` model's first output as a Relax module (``torch.export``, then
    TVM's importer; weights as constants), after the zero pipeline."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    class First(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x, return_dict=False)[0]

    torch.manual_seed(0)
    with torch.no_grad():
        exported = torch.export.export(First(model.eval()), (example,))
    mod = from_exported_program(exported, keep_params_as_input=False)
    return relax.get_pipeline("zero")(mod)

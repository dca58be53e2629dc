"""Transformer and ConvNet architectures exported from torch: memory of planning, and plans.

    python -m benchmarks onnx-architectures [--models gpt2,bert-base] [--time-limit 10]

Each model is written here from its published configuration (width, layers,
heads, vocabulary; random weights) as a small ``torch.nn`` module and
exported with ``torch.onnx.export`` (TorchScript exporter, opset 17) to a
temporary folder: GPT-2 small, BERT-base, DistilBERT, a T5-small encoder, a
Whisper-tiny encoder, ViT-B/16, a Llama-style 1024x8 and a Qwen2-style 896x6
decoder, ConvNeXt-tiny. (MobileViT-small is left out.)

Per model: the file's size; peak RSS and seconds of ``memplan solve`` in its
own process (`benchmarks.onnx_scale.measure`); whether the weightless
problem equals the one built from the whole model; and the arenas of
greedy_by_size with memplan's optional in-place aliases and without them
(``inplace=False``: the fair peer of TFLite's and onnxruntime's greedy), of
``memplan.solve`` (in-place on) and the lower bound. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import torch
from torch import nn

SEQUENCE = 128


class RMSNorm(nn.Module):
    """Root-mean-square norm in plain operators (the exporter's opset 17 has no RMSNorm)."""

    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Block(nn.Module):
    """One pre- or post-norm transformer layer; MLP ``gelu``, ``relu`` or ``swiglu``."""

    def __init__(self, d, heads, ffn, *, kv_heads=None, mlp="gelu", rms=False, post=False,
                 causal=False):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads or heads
        self.dh, self.post, self.causal, self.mlp = d // heads, post, causal, mlp
        norm = (lambda: RMSNorm(d)) if rms else (lambda: nn.LayerNorm(d))
        self.norm1, self.norm2 = norm(), norm()
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * self.kv_heads * self.dh)
        self.o = nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.gate = nn.Linear(d, ffn) if mlp == "swiglu" else None

    def attention(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.dh).transpose(1, 2)
        k, v = self.kv(x).view(b, s, 2, self.kv_heads, self.dh).unbind(2)
        k, v = (t.transpose(1, 2).repeat_interleave(self.heads // self.kv_heads, 1)
                for t in (k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.dh)
        if self.causal:
            scores = scores + torch.full((s, s), -1e4).triu(1)
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, -1)
        return self.o(out)

    def feed_forward(self, x):
        h = self.up(x)
        if self.gate is not None:
            h = nn.functional.silu(self.gate(x)) * h
        else:
            h = nn.functional.gelu(h) if self.mlp == "gelu" else torch.relu(h)
        return self.down(h)

    def forward(self, x):
        if self.post:
            x = self.norm1(x + self.attention(x))
            return self.norm2(x + self.feed_forward(x))
        x = x + self.attention(self.norm1(x))
        return x + self.feed_forward(self.norm2(x))


class Transformer(nn.Module):
    """Token (or patch, or audio) embedding, ``layers`` blocks, a final norm and a head."""

    def __init__(self, d, layers, heads, ffn, *, vocab=None, head=None, front="tokens",
                 **block):
        super().__init__()
        self.front = front
        if front == "tokens":
            self.embed = nn.Embedding(vocab, d)
        elif front == "patches":
            self.embed = nn.Conv2d(3, d, 16, 16)
        else:  # audio: Whisper's two convolutions over 80 mel bins
            self.embed = nn.Sequential(nn.Conv1d(80, d, 3, padding=1), nn.GELU(),
                                       nn.Conv1d(d, d, 3, 2, padding=1), nn.GELU())
        self.blocks = nn.ModuleList(Block(d, heads, ffn, **block) for _ in range(layers))
        self.norm = RMSNorm(d) if block.get("rms") else nn.LayerNorm(d)
        self.head = nn.Linear(d, head, bias=False) if head else None

    def forward(self, x):
        x = self.embed(x)
        if self.front == "patches":
            x = x.flatten(2).transpose(1, 2)
        elif self.front == "audio":
            x = x.transpose(1, 2)
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        return self.head(x) if self.head is not None else x


class ConvNeXtBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.dw = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.norm = nn.LayerNorm(d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        h = self.norm(self.dw(x).permute(0, 2, 3, 1))
        return x + self.down(nn.functional.gelu(self.up(h))).permute(0, 3, 1, 2)


def convnext_tiny() -> nn.Module:
    dims, depths = (96, 192, 384, 768), (3, 3, 9, 3)
    layers: list[nn.Module] = [nn.Conv2d(3, dims[0], 4, 4)]
    for i, (d, depth) in enumerate(zip(dims, depths, strict=True)):
        if i:
            layers.append(nn.Conv2d(dims[i - 1], d, 2, 2))
        layers += [ConvNeXtBlock(d) for _ in range(depth)]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(dims[-1], 1000)]
    return nn.Sequential(*layers)


TOKENS = torch.zeros(1, SEQUENCE, dtype=torch.int64)
IMAGE = torch.zeros(1, 3, 224, 224)
MODELS = {  # name: (build, example input)
    "gpt2": (lambda: Transformer(768, 12, 12, 3072, vocab=50257, head=50257, causal=True),
             TOKENS),
    "bert-base": (lambda: Transformer(768, 12, 12, 3072, vocab=30522, post=True), TOKENS),
    "distilbert": (lambda: Transformer(768, 6, 12, 3072, vocab=30522, post=True), TOKENS),
    "t5-small-encoder": (lambda: Transformer(512, 6, 8, 2048, vocab=32128, mlp="relu",
                                             rms=True), TOKENS),
    "whisper-tiny-encoder": (lambda: Transformer(384, 4, 6, 1536, front="audio"),
                             torch.zeros(1, 80, 3000)),
    "vit-b16": (lambda: Transformer(768, 12, 12, 3072, front="patches", head=1000), IMAGE),
    "llama-1024x8": (lambda: Transformer(1024, 8, 16, 2816, vocab=32000, head=32000,
                                         kv_heads=4, mlp="swiglu", rms=True, causal=True),
                     TOKENS),
    "qwen2-896x6": (lambda: Transformer(896, 6, 14, 4864, vocab=151936, kv_heads=2,
                                        mlp="swiglu", rms=True, causal=True), TOKENS),
    "convnext-tiny": (convnext_tiny, IMAGE),
}


def export(name: str, path: Path) -> None:
    build, example = MODELS[name]
    torch.manual_seed(0)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(build().eval(), (example,), str(path), dynamo=False,
                          opset_version=17)


def row(name: str, path: Path, time_limit: float) -> str:
    import onnx

    from benchmarks.onnx_scale import measure
    from memplan import lower_bound, plan_with, solve, validate
    from memplan.formats.memplan_json import problem_to_dict
    from memplan.onnx import onnx_graph
    from memplan.onnx.onnx import from_onnx

    command = "import sys; from memplan.cli import main; sys.exit(main())"
    rss, seconds, _ = measure([sys.executable, "-P", "-c", command, "solve", str(path),
                               "--time-limit", str(time_limit)], dict(os.environ))
    problem = from_onnx(path)
    whole = onnx.load(str(path))
    original = onnx_graph.load_weightless
    onnx_graph.load_weightless = lambda model: (model, None)
    try:
        same = problem_to_dict(from_onnx(whole, name=problem.name)) == problem_to_dict(problem)
    finally:
        onnx_graph.load_weightless = original
    del whole
    plans = {"greedy": plan_with("greedy_by_size", problem),
             "greedy, no in-place": plan_with("greedy_by_size", from_onnx(path, inplace=False)),
             "memplan": solve(problem, time_limit=time_limit)}
    assert not validate(problem, plans["greedy"]) and not validate(problem, plans["memplan"])
    mib = {key: f"{plan.arena_size / 2**20:.2f}" for key, plan in plans.items()}
    return (f"| {name} | {path.stat().st_size / 1e6:.0f} | {rss:.0f} | {seconds:.1f} | "
            f"{'yes' if same else 'NO'} | {mib['greedy, no in-place']} | {mib['greedy']} | "
            f"{mib['memplan']} | {lower_bound(problem) / 2**20:.2f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks onnx-architectures",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--time-limit", type=float, default=10.0)
    args = parser.parse_args(argv)
    print("| model | file MB | solve peak RSS MB | solve s | same problem | greedy_by_size, "
          "no in-place MiB | greedy_by_size MiB | memplan MiB | bound MiB |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.models.split(","):
        folder = Path(tempfile.mkdtemp(prefix="onnx-arch-"))
        try:
            export(name, folder / f"{name}.onnx")
            print(row(name, folder / f"{name}.onnx", args.time_limit), flush=True)
        finally:
            shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m benchmarks.pte_models``: ExecuTorch programs (``.pte``) re-planned by memplan.

Exports small PyTorch models built in code (random weights, nothing
downloaded) with ``torch.export`` -> ``executorch.exir.to_edge`` ->
``to_executorch`` (ExecuTorch's greedy memory planner), then for each program:

- reads it back (`memplan.executorch.executorch_pte`): planned tensors, views
  (aliases), the live-load lower bound, ExecuTorch's own arena size;
- plans it with memplan (``memplan.solve``: heuristics, then CP-SAT,
  ``--time-limit`` seconds) and writes the re-planned program;
- runs the original and the re-planned program in ExecuTorch's runtime on
  seeded inputs, three calls for stateful programs
  (`memplan.executorch.executorch_runtime`): outputs bit-identical.

The models: ``mlp`` (three linear layers), ``conv_net`` (convolutions, batch
norm in eval mode, a residual add, pooling), ``decoder`` (two
transformer blocks with a KV cache in mutable buffers, one token a call),
``encoder`` (a BERT-like encoder, four layers, dim 64, 32 tokens),
``mobilenet`` (inverted residual blocks, 64x64), ``lstm`` (two layers, 16 steps),
``llama`` (ExecuTorch's llama example, dim 256, 4 layers, context 128, no KV
cache), ``llama_kv`` (the same with its KV cache, context 256) and
``llama_kv_large`` (dim 512, 8 layers, context 512, KV cache: about a minute to
export). Exports run under ``torch.no_grad()``.

    python -m benchmarks.pte_models --time-limit 10 [--models mlp,decoder] [--save DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

CONTEXT = 16  # the decoder's cache length


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                          torch.nn.Linear(64, 64), torch.nn.GELU(),
                                          torch.nn.Linear(64, 10))

    def forward(self, x):
        return self.layers(x)


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1),
                                        torch.nn.BatchNorm2d(8), torch.nn.ReLU())
        self.block = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(),
                                         torch.nn.Conv2d(8, 8, 3, padding=1))
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(x + self.block(x))
        return self.head(torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


class Block(torch.nn.Module):
    """Attention over a KV cache kept in mutable buffers, then a feed-forward layer."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)
        self.ff = torch.nn.Sequential(torch.nn.Linear(dim, 2 * dim), torch.nn.SiLU(),
                                      torch.nn.Linear(2 * dim, dim))
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        shape = (1, heads, CONTEXT, self.head_dim)
        self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape), persistent=False)

    def forward(self, x, pos, mask):
        q, k, v = self.qkv(self.norm1(x)).split(x.shape[-1], dim=-1)
        q, k, v = (t.view(1, 1, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        attention = torch.nn.functional.scaled_dot_product_attention(
            q, self.k_cache, self.v_cache, attn_mask=mask)
        x = x + self.out(attention.transpose(1, 2).reshape(1, 1, -1))
        return x + self.ff(self.norm2(x))


class Decoder(torch.nn.Module):
    """A tiny decoder: one token and its position a call, logits out, KV cache as state."""

    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 2, layers: int = 2):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.blocks = torch.nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, token, pos):
        mask = (torch.arange(CONTEXT) <= pos).view(1, 1, 1, CONTEXT)
        x = self.embed(token)
        for block in self.blocks:
            x = block(x, pos, mask)
        return self.head(x)


class Encoder(torch.nn.Module):
    """A small BERT-like encoder: embeddings, four transformer layers, a pooled head."""

    def __init__(self, vocab: int = 256, dim: int = 64, layers: int = 4):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        layer = torch.nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.0, batch_first=True)
        self.layers = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(dim, 2)

    def forward(self, tokens):
        return self.head(self.layers(self.embed(tokens)).mean(dim=1))


class MobileNet(torch.nn.Module):
    """Inverted residual blocks (expand, depthwise, project), 64x64 input."""

    def __init__(self, widths=(16, 24, 32, 64), expand: int = 4):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, widths[0], 3, stride=2, padding=1)
        blocks = []
        for c_in, c_out in zip(widths, widths[1:], strict=False):
            hidden = c_in * expand
            blocks.append(torch.nn.Sequential(
                torch.nn.Conv2d(c_in, hidden, 1), torch.nn.Hardswish(),
                torch.nn.Conv2d(hidden, hidden, 3, stride=2, padding=1, groups=hidden),
                torch.nn.Hardswish(), torch.nn.Conv2d(hidden, c_out, 1)))
        self.blocks = torch.nn.Sequential(*blocks)
        self.head = torch.nn.Linear(widths[-1], 10)

    def forward(self, x):
        x = self.blocks(torch.relu(self.stem(x)))
        return self.head(x.mean(dim=(2, 3)))


def _llama(kv_cache: bool, dim: int = 256, layers: int = 4, context: int | None = None):
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    context = context or (256 if kv_cache else 128)
    args = ModelArgs(dim=dim, n_layers=layers, n_heads=8, vocab_size=512, max_seq_len=context,
                     max_context_len=context, use_kv_cache=kv_cache,
                     generate_full_logits=False, enable_dynamic_shape=False)
    model = construct_transformer(args).eval()
    if kv_cache:
        return model, (torch.tensor([[1]]), {"input_pos": torch.tensor([0])})  # ForwardOptions
    return model, (torch.randint(0, 512, (1, context)),)


MODELS = {
    "mlp": lambda: (MLP(), (torch.randn(4, 32),)),
    "conv_net": lambda: (ConvNet(), (torch.randn(1, 3, 16, 16),)),
    "decoder": lambda: (Decoder(), (torch.tensor([[3]]), torch.tensor([0]))),
    "encoder": lambda: (Encoder(), (torch.randint(0, 256, (1, 32)),)),
    "mobilenet": lambda: (MobileNet(), (torch.randn(1, 3, 64, 64),)),
    "lstm": lambda: (torch.nn.LSTM(32, 64, num_layers=2), (torch.randn(16, 1, 32),)),
    "llama": lambda: _llama(False),
    "llama_kv": lambda: _llama(True),
    "llama_kv_large": lambda: _llama(True, dim=512, layers=8, context=512),
}


def export_pte(name: str) -> bytes:
    """The ``.pte`` bytes of model ``name``, planned by ExecuTorch's greedy planner."""
    from executorch.exir import to_edge

    torch.manual_seed(0)
    model, args = MODELS[name]()
    with torch.no_grad():
        exported = torch.export.export(model.eval(), args)
        return to_edge(exported).to_executorch().buffer


def measure(name: str, time_limit: float, save: str | None = None) -> dict:
    """One row: ExecuTorch's arena, memplan's, the bound, status, seconds (export, read,
    plan, prove), the runtime's verdict."""
    import memplan
    from memplan.executorch.executorch_pte import pte_layout
    from memplan.executorch.executorch_runtime import prove_program

    started = time.perf_counter()
    data = export_pte(name)
    if save:  # for the command line: memplan info/solve DIR/<model>.pte
        Path(save, f"{name}.pte").write_bytes(data)
    exported = time.perf_counter() - started
    started = time.perf_counter()
    layout = pte_layout(data)
    read = time.perf_counter() - started
    started = time.perf_counter()
    plan = memplan.solve(layout.problem, time_limit=time_limit)
    seconds = time.perf_counter() - started
    started = time.perf_counter()
    proof = prove_program(data, plan)
    proved = time.perf_counter() - started
    return {"model": name, "tensors": len(layout.problem),
            "views": len(layout.problem.aliases), "stateful": layout.stateful,
            "greedy": layout.arena_size, "memplan": proof.planned_bytes,
            "bound": plan.lower_bound, "status": plan.status, "seconds": seconds,
            "export_seconds": exported, "read_seconds": read, "prove_seconds": proved,
            "runtime": "identical" if proof.ok else "MISMATCH", "calls": proof.calls}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--save", metavar="DIR", help="write each exported program to "
                        "DIR/<model>.pte")
    args = parser.parse_args(argv)
    print("| model | tensors | views | greedy bytes | memplan bytes | bound | greedy / bound "
          "| status | plan s | read s | prove s | runtime (calls) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    failed = False
    for name in args.models.split(","):
        r = measure(name, args.time_limit, args.save)
        failed |= r["runtime"] != "identical"
        print(f"| {name}{' (state)' * r['stateful']} | {r['tensors']} | {r['views']} | "
              f"{r['greedy']:,} | {r['memplan']:,} | {r['bound']:,} | "
              f"{r['greedy'] / r['bound']:.3f} | {r['status']} | {r['seconds']:.2f} | "
              f"{r['read_seconds']:.2f} | {r['prove_seconds']:.2f} | {r['runtime']} "
              f"({r['calls']}) |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

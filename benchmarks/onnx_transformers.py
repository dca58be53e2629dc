"""Real architectures from the ``transformers`` library, exported as users export them.

    python -m benchmarks onnx-transformers [--models bert,clip-vision] [--time-limit 5]

Each model is built from a configuration written here (hidden 32, 2 layers,
a vocabulary of 128; random weights, seed 0; nothing is downloaded), wrapped
to return its first output, and exported with both of torch's exporters
(``dynamo=False``, opset 17; ``dynamo=True``, opset 18), text and speech
models with and without an attention mask (all ones, as a tokenizer returns
for one sequence). Encoders (BERT, DeBERTa-v2), decoders (GPT-2, OPT,
Mistral, Phi-3, Gemma-2 with its sliding window, a small Mixtral with four
experts), vision models (CLIP vision and ViT with their class token, Swin
with its windows, SegFormer) and speech (Wav2Vec2).

Per export, one row:

- onnxruntime runs the whole model on random inputs, or the export is listed
  apart with the reason (the exporter failed, or onnxruntime cannot run what
  it wrote): those are not memplan's to plan, and stay out of its counts;
- memplan plans it (`from_onnx`, no ``dims``) or refuses it, and why;
- the arenas of ``greedy_by_size`` without in-place aliases (the fair peer of
  the runtimes' own greedy planners), of ``memplan.solve`` and the lower
  bound; the gap of memplan's plan to the bound (0: optimal);
- ``memplan prove``'s verdict on memplan's plan (the arena run against the
  same node-by-node run outside it, bit for bit), and beside it the largest
  difference of a whole-model onnxruntime run.

`corpus_row` is what the tests run on a few tiny models.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

TOKENS = 16  # sequence length of the text models
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             vocab_size=128, max_position_embeddings=64)


def _decoder(config_class, **extra):
    def config():
        return config_class(**SMALL, num_key_value_heads=1, use_cache=False, pad_token_id=0,
                            **extra)
    return config


def _configs():
    """name -> (kind, a function returning the model's configuration)."""
    import transformers as t

    return {
        "bert": ("text", lambda: t.BertConfig(**SMALL)),
        "deberta-v2": ("text", lambda: t.DebertaV2Config(
            **SMALL, relative_attention=True, pos_att_type=["p2c", "c2p"],
            max_relative_positions=32)),
        "gpt2": ("text", lambda: t.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=128,
                                              n_positions=64, use_cache=False)),
        "opt": ("text", lambda: t.OPTConfig(hidden_size=32, num_hidden_layers=2, ffn_dim=64,
                                            num_attention_heads=2, vocab_size=128,
                                            max_position_embeddings=64, word_embed_proj_dim=32,
                                            use_cache=False)),
        "mistral": ("text", _decoder(t.MistralConfig, sliding_window=None)),
        "phi3": ("text", _decoder(t.Phi3Config)),
        "gemma2": ("text", _decoder(t.Gemma2Config, head_dim=16, sliding_window=8)),
        # experts as batched matmuls: the default grouped form counts tokens per expert
        # with histc, which neither exporter writes
        "mixtral": ("text", _decoder(t.MixtralConfig, num_local_experts=4,
                                     num_experts_per_tok=2, sliding_window=None,
                                     experts_implementation="batched_mm")),
        "clip-vision": ("image", lambda: t.CLIPVisionConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
            image_size=32, patch_size=8)),
        "vit": ("image", lambda: t.ViTConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
            image_size=32, patch_size=8)),
        "swin": ("image", lambda: t.SwinConfig(image_size=32, patch_size=4, embed_dim=16,
                                               depths=[2, 2], num_heads=[2, 2], window_size=4)),
        "segformer": ("image", lambda: t.SegformerConfig(
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
            num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2],
            decoder_hidden_size=32)),
        "wav2vec2": ("speech", lambda: t.Wav2Vec2Config(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=2, vocab_size=32)),
    }


MODELS = ("bert", "deberta-v2", "gpt2", "opt", "mistral", "phi3", "gemma2", "mixtral",
          "clip-vision", "vit", "swin", "segformer", "wav2vec2")
EXPORTERS = ("legacy", "dynamo")


def variants(name: str) -> list[tuple[str, bool]]:
    """(exporter, with an attention mask) of one model: masks for text and speech only."""
    kind = _configs()[name][0]
    masks = (False, True) if kind in ("text", "speech") else (False,)
    return [(exporter, mask) for exporter in EXPORTERS for mask in masks]


def build(name: str, tokens: int = TOKENS):
    """``name`` built from its configuration (seed 0, evaluation mode) and its seeded
    inputs by name: ``tokens`` tokens, a 32 x 32 image or 1,600 samples of speech."""
    import torch
    from transformers import AutoModel

    kind, config = _configs()[name]
    torch.manual_seed(0)
    model = AutoModel.from_config(config()).eval()
    if kind == "text":
        inputs = {"input_ids": torch.randint(1, 128, (1, tokens))}
    elif kind == "image":
        inputs = {"pixel_values": torch.randn(1, 3, 32, 32)}
    else:
        inputs = {"input_values": torch.randn(1, 1600)}
    return model, inputs


def export(name: str, exporter: str, mask: bool, path: Path) -> None:
    """Build ``name`` (seed 0) and export it to ``path``; raises what the exporter raises."""
    import torch

    model, inputs = build(name)
    if mask:
        first = next(iter(inputs.values()))
        inputs["attention_mask"] = torch.ones(first.shape[:2], dtype=torch.long)

    class First(torch.nn.Module):
        """The model's first output alone: a tensor, whatever the output class."""

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            return self.model(**dict(zip(inputs, args, strict=True)))[0]

    with torch.no_grad(), warnings.catch_warnings(), _quiet_stdout():
        warnings.simplefilter("ignore")
        torch.onnx.export(First(), tuple(inputs.values()), str(path), input_names=list(inputs),
                          output_names=["output"], dynamo=exporter == "dynamo",
                          opset_version=17 if exporter == "legacy" else 18,
                          **({"verbose": False, "report": False, "external_data": False}
                             if exporter == "dynamo" else {}))


@contextlib.contextmanager
def _quiet_stdout():
    """Standard output to nowhere, at the file descriptor: the legacy exporter's C++ prints the
    whole graph when it fails."""
    sys.stdout.flush()
    saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def _first_line(error: BaseException) -> str:
    text = next((line.strip() for line in str(error).splitlines() if line.strip()),
                type(error).__name__)
    return text if len(text) < 160 else text[:157] + "..."


@dataclass
class Row:
    """What one export showed; ``apart`` is the reason it is outside memplan's counts."""

    name: str
    exporter: str
    mask: bool
    apart: str = ""  # the exporter or onnxruntime failed: not memplan's to plan
    refused: str = ""  # memplan's one-line refusal
    buffers: int = 0
    greedy_no_inplace: int = 0
    memplan: int = 0
    bound: int = 0
    proven: bool | None = None
    verdict: str = ""  # prove's first line
    whole_model: float | None = None  # largest difference of a whole-model run

    def cells(self) -> list[str]:
        mask = "yes" if self.mask else "no"
        if self.apart:
            return [self.name, self.exporter, mask, "apart: " + self.apart]
        if self.refused:
            return [self.name, self.exporter, mask, "REFUSED: " + self.refused]
        gap = (self.memplan - self.bound) / self.bound if self.bound else 0.0

        def kib(value: int) -> str:
            return f"{value / 1024:.1f}"

        whole = "-" if self.whole_model is None else f"{self.whole_model:.1e}"
        return [self.name, self.exporter, mask, "planned", str(self.buffers),
                kib(self.greedy_no_inplace), kib(self.memplan), kib(self.bound),
                f"{100 * gap:.2f} %", "PROVEN" if self.proven else "MISMATCH", whole]


def corpus_row(name: str, exporter: str, mask: bool, folder: Path, *,
               time_limit: float = 2.0) -> Row:
    """Export, run, plan and prove one model; see the module docstring."""
    import numpy as np
    import onnxruntime as ort

    from memplan import ProblemError, lower_bound, plan_with, solve, validate
    from memplan.onnx.onnx import from_onnx
    from memplan.onnx.onnx_arena import random_inputs
    from memplan.onnx.prove import prove_plan, with_model_options

    row = Row(name, exporter, mask)
    path = folder / f"{name}-{exporter}{'-mask' if mask else ''}.onnx"
    try:
        export(name, exporter, mask, path)
    except Exception as error:  # the exporter's own failures, whatever their type
        row.apart = f"the {exporter} exporter fails: {_first_line(error)}"
        return row
    try:
        import onnx

        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        session.run(None, random_inputs(onnx.load(str(path))))
    except Exception as error:
        row.apart = f"onnxruntime cannot run it: {_first_line(error)}"
        return row
    try:
        problem = from_onnx(path)
    except ProblemError as error:
        row.refused = error.reason
        return row
    plan = with_model_options(solve(problem, time_limit=time_limit), {})
    greedy = plan_with("greedy_by_size", from_onnx(path, inplace=False))
    assert not validate(problem, plan), "memplan's plan is invalid"
    row.buffers, row.memplan = len(problem), plan.arena_size
    row.greedy_no_inplace, row.bound = greedy.arena_size, lower_bound(problem)
    proof = prove_plan(path, problem, plan, {})
    row.proven, row.verdict = proof.ok, proof.lines()[0]
    gaps = [proof.report.largest_difference(output) for output in proof.report.normal]
    known = [gap for gap in gaps if gap is not None]
    row.whole_model = float(np.max(known)) if known else None
    return row


HEADER = ("| model | exporter | mask | memplan | buffers | greedy_by_size, no in-place KiB | "
          "memplan KiB | bound KiB | gap | prove | whole-model max diff |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks onnx-transformers",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    parser.add_argument("--time-limit", type=float, default=5.0)
    args = parser.parse_args(argv)
    print(HEADER)
    rows = []
    folder = Path(tempfile.mkdtemp(prefix="onnx-transformers-"))
    try:
        for name in args.models.split(","):
            for exporter, mask in variants(name):
                if exporter in args.exporters.split(","):
                    rows.append(corpus_row(name, exporter, mask, folder,
                                           time_limit=args.time_limit))
                    print("| " + " | ".join(rows[-1].cells()) + " |", flush=True)
    finally:
        shutil.rmtree(folder)
    counted = [row for row in rows if not row.apart]
    planned = [row for row in counted if not row.refused]
    print(f"\n{len(rows)} exports; {len(rows) - len(counted)} apart (exporter or onnxruntime); "
          f"of {len(counted)} that onnxruntime runs, memplan plans {len(planned)}, "
          f"{sum(row.memplan == row.bound for row in planned)} at the bound, "
          f"{sum(bool(row.proven) for row in planned)} PROVEN")
    return 0 if len(planned) == len(counted) and all(row.proven for row in planned) else 1


if __name__ == "__main__":
    sys.exit(main())

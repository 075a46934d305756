"""The model dashboard's suite: models of three families (torchvision, timm, transformers), built
from their constructors or configs with random weights (nothing is downloaded), each in
inference (bf16, eval, no grad) and training (bf16 autocast, forward, loss and backward).

Each (family, model, mode) is a bench ``Case`` named ``family.model.mode``, so that
``python -m solder bench --suite dashboard`` runs them through the same runner as every other
case (checked against eager, timed in interleaved rounds, cold compile, the memory of one call)
and ``python -m solder.bench.dashboard`` merges the JSON of several runs (parts that fit a GPU
session: ``--part 2/4``) into one table. With ``--quick`` or on the CPU each model is built at
a toy size.
"""
from __future__ import annotations

from typing import Callable

import torch

from solder.bench.cases import Case, Workload
from solder.bench.models import MODEL_TOLERANCE, _calibrate_batchnorm

MODES = ("inference", "training")

TORCHVISION = ["resnet18", "resnet50", "mobilenet_v3_large", "efficientnet_b0",
               "regnet_y_400mf", "densenet121", "convnext_tiny", "vit_b_16", "swin_t",
               "shufflenet_v2_x1_0", "mnasnet1_0", "squeezenet1_1"]
TIMM = ["resnet50d", "mobilenetv3_large_100", "efficientnet_b0", "vit_small_patch16_224",
        "deit_small_patch16_224", "convnext_tiny", "regnety_008", "mixer_b16_224",
        "swin_tiny_patch4_window7_224", "cait_xxs24_224"]
# transformers: (config class, model class, kind, the config's sizes at full and toy size)
_TOY_TEXT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, vocab_size=512, max_position_embeddings=128)
TRANSFORMERS = {
    "bert": ("BertConfig", "BertForMaskedLM", "masked", {}, _TOY_TEXT),
    "roberta": ("RobertaConfig", "RobertaForMaskedLM", "masked", {}, _TOY_TEXT),
    "distilbert": ("DistilBertConfig", "DistilBertForMaskedLM", "masked", {},
                   dict(dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=512,
                        max_position_embeddings=128)),
    "albert": ("AlbertConfig", "AlbertForMaskedLM", "masked", {},
               dict(_TOY_TEXT, embedding_size=32)),
    "electra": ("ElectraConfig", "ElectraForMaskedLM", "masked", {},
                dict(_TOY_TEXT, embedding_size=64)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", "causal", {},
             dict(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=128)),
    "llama": ("LlamaConfig", "LlamaForCausalLM", "causal",
              dict(hidden_size=1024, num_hidden_layers=8, num_attention_heads=16,
                   num_key_value_heads=16, intermediate_size=2816, vocab_size=32000),
              dict(_TOY_TEXT, num_key_value_heads=4)),
    "mistral": ("MistralConfig", "MistralForCausalLM", "causal",
                dict(hidden_size=1024, num_hidden_layers=8, num_attention_heads=16,
                     num_key_value_heads=4, intermediate_size=3584, vocab_size=32000),
                dict(_TOY_TEXT, num_key_value_heads=2)),
    "opt": ("OPTConfig", "OPTForCausalLM", "causal", {},
            dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
                 vocab_size=512, max_position_embeddings=128, word_embed_proj_dim=64)),
    "t5": ("T5Config", "T5ForConditionalGeneration", "seq2seq",
           dict(d_model=512, num_layers=6, num_heads=8, d_ff=2048, vocab_size=32128),
           dict(d_model=64, d_kv=16, num_layers=2, num_heads=4, d_ff=128, vocab_size=512)),
    "bart": ("BartConfig", "BartForConditionalGeneration", "seq2seq", {},
             dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                  decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                  vocab_size=512, max_position_embeddings=128)),
    "vit": ("ViTConfig", "ViTForImageClassification", "image", {},
            dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, image_size=32, patch_size=8)),
}
# dropout off everywhere: each compiler draws its own random numbers, and every step is
# checked against eager's values
_NO_DROPOUT = ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout",
               "activation_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop", "dropout_rate",
               "classifier_dropout_prob", "hidden_dropout", "classifier_dropout")


def _step(model, inputs: tuple, mode: str, loss_of: Callable) -> Workload:
    """A Workload running ``model`` on ``inputs``: its output in inference, a loss of it under
    bf16 autocast (gradients of every parameter) in training."""
    if mode == "inference":
        def forward(*xs):
            return _first(model(*xs))
        return Workload(forward, inputs, tolerance=MODEL_TOLERANCE)
    device_type = inputs[0].device.type

    def loss(*xs):
        with torch.autocast(device_type, dtype=torch.bfloat16):
            return loss_of(model(*xs))
    params = tuple(p for p in model.parameters() if p.requires_grad)
    return Workload(loss, inputs, grad_leaves=params, tolerance=MODEL_TOLERANCE)


def _first(out):
    """A model's main output: a tensor, the logits of a transformers output, the first of a
    tuple."""
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits"):
        return out.logits
    return out[0]


def _mean_loss(out):
    return _first(out).float().mean()


def _vision(model, device, quick, mode, side=224) -> Workload:
    batch = 2 if quick or device.type == "cpu" else (16 if mode == "training" else 32)
    side = 64 if (quick or device.type == "cpu") and side == 224 else side
    x = torch.randn(batch, 3, side, side, device=device)
    model = model.to(device)
    if mode == "inference":
        if any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
            _calibrate_batchnorm(model, x)
        model = model.to(torch.bfloat16).eval()
        x = x.to(torch.bfloat16)
    else:
        model = model.train()
    return _step(model, (x,), mode, _mean_loss)


def torchvision_case(name: str, mode: str):
    def build(device, quick):
        import torchvision
        torch.manual_seed(0)
        kwargs = {"image_size": 64} if name == "vit_b_16" and (quick or device.type == "cpu") \
            else {}
        return _vision(getattr(torchvision.models, name)(weights=None, **kwargs), device, quick,
                       mode)
    return Case(f"torchvision.{name}.{mode}", f"torchvision {name}, {mode}", build,
                needs=("torchvision",))


def timm_case(name: str, mode: str):
    def build(device, quick):
        import timm
        torch.manual_seed(0)
        small = quick or device.type == "cpu"
        kwargs = {"img_size": 64} if small and any(k in name for k in ("vit", "deit", "mixer",
                                                                         "swin", "cait")) else {}
        return _vision(timm.create_model(name, pretrained=False, **kwargs), device, quick, mode)
    return Case(f"timm.{name}.{mode}", f"timm {name}, {mode}", build, needs=("timm",))


def transformers_case(name: str, mode: str):
    config_cls, model_cls, kind, full, toy = TRANSFORMERS[name]

    def build(device, quick):
        import transformers
        small = quick or device.type == "cpu"
        config = getattr(transformers, config_cls)(**(toy if small else full))
        if getattr(config, "decoder_start_token_id", None) is None and kind == "seq2seq":
            config.decoder_start_token_id = 0   # (shifting the labels right needs it)
        for key in _NO_DROPOUT:
            if hasattr(config, key) and isinstance(getattr(config, key), float):
                setattr(config, key, 0.0)
        torch.manual_seed(0)
        model = getattr(transformers, model_cls)(config).to(device)
        batch, seq = (2, 16) if small else (4 if mode == "training" else 8, 512)
        if kind == "image":
            return _vision(model, device, quick, mode, side=config.image_size)
        vocab = config.vocab_size
        ids = torch.randint(0, vocab, (batch, seq), device=device)
        if mode == "inference":
            model = model.to(torch.bfloat16).eval()
        else:
            model = model.train()
        if kind == "seq2seq":
            labels = torch.randint(0, vocab, (batch, seq), device=device)
            return _step(_WithLabels(model), (ids, labels), mode, lambda out: out.loss) \
                if mode == "training" else _step(_Seq2Seq(model), (ids, labels), mode, None)
        if mode == "training":
            return _step(_WithLabels(model), (ids, ids.clone()), mode, lambda out: out.loss)
        return _step(model, (ids,), mode, _mean_loss)
    return Case(f"transformers.{name}.{mode}", f"transformers {model_cls}, {mode}", build,
                needs=("transformers",))


class _WithLabels(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, labels):
        return self.model(input_ids=ids, labels=labels)


class _Seq2Seq(torch.nn.Module):
    """Inference of an encoder-decoder: the logits for the given decoder inputs."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, decoder_ids):
        return self.model(input_ids=ids, decoder_input_ids=decoder_ids).logits


def dashboard_cases(family: str = "", mode: str = "") -> list[Case]:
    cases = []
    for m in MODES:
        if mode and m != mode:
            continue
        if family in ("", "torchvision"):
            cases += [torchvision_case(n, m) for n in TORCHVISION]
        if family in ("", "timm"):
            cases += [timm_case(n, m) for n in TIMM]
        if family in ("", "transformers"):
            cases += [transformers_case(n, m) for n in TRANSFORMERS]
    return cases


def part_of(cases: list, part: str) -> list:
    """``part`` "k/n": the k-th of n interleaved slices (1-based), so that every part gets a mix
    of families and sizes."""
    from ..cli_help import interleaved_part
    return interleaved_part(cases, part, "--part")

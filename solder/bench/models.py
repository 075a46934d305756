"""Model cases: real architectures built from configs with random weights (nothing is
downloaded). With ``quick`` or on the CPU each is shrunk to a toy size (the CPU interpreter runs it)."""
from __future__ import annotations

import torch

from solder.bench.cases import Case, Workload

# Whole networks in half precision accumulate rounding differently under fusion; judge them by
# 5% of each output's largest magnitude rather than per-op tolerances.
MODEL_TOLERANCE = (5e-2, 5e-2)


def gpt2(device, quick):
    from transformers import GPT2Config, GPT2LMHeadModel

    if quick or device.type == "cpu":
        config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=128,
                            bos_token_id=0, eos_token_id=0)
        batch, seq = 2, 16
    else:
        config = GPT2Config()  # the 124M model: 12 layers, 768 wide, 12 heads, vocab 50257
        batch, seq = 8, 512
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).to(device=device, dtype=torch.bfloat16).eval()
    ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)

    def forward(ids):
        return model(input_ids=ids, use_cache=False).logits

    return Workload(forward, (ids,), tolerance=MODEL_TOLERANCE)


def llama_train(device, quick, gpu_size=False):
    from transformers import LlamaConfig, LlamaForCausalLM

    if (quick or device.type == "cpu") and not gpu_size:
        sizes = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=4, intermediate_size=176, vocab_size=512,
                     max_position_embeddings=128)
        batch, seq = 2, 32
    else:
        sizes = dict(hidden_size=1024, num_hidden_layers=8, num_attention_heads=16,
                     num_key_value_heads=16, intermediate_size=2816, vocab_size=32000,
                     max_position_embeddings=2048)
        batch, seq = 4, 1024
    config = LlamaConfig(**sizes)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(device=device, dtype=torch.bfloat16).train()
    ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)
    labels = torch.randint(0, config.vocab_size, (batch, seq), device=device)

    def loss(ids, labels):
        return model(input_ids=ids, labels=labels, use_cache=False).loss

    params = tuple(p for p in model.parameters() if p.requires_grad)
    return Workload(loss, (ids, labels), grad_leaves=params, tolerance=MODEL_TOLERANCE)


def resnet50(device, quick):
    import torchvision

    batch, side = (2, 64) if quick or device.type == "cpu" else (64, 224)
    # fp16 convolutions on the CPU are slow or missing; the smoke test runs fp32 there.
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).to(device)
    x = torch.randn(batch, 3, side, side, device=device)
    _calibrate_batchnorm(model, x)
    model = model.to(dtype=dtype, memory_format=torch.channels_last).eval()
    x = x.to(dtype=dtype).contiguous(memory_format=torch.channels_last)

    def forward(x):
        return model(x)

    return Workload(forward, (x,), tolerance=MODEL_TOLERANCE)


def bert_train(device, quick):
    from transformers import BertConfig, BertForMaskedLM

    # dropout off: each compiler draws its own random numbers, and the step is checked against
    # eager's loss and gradients
    no_dropout = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if quick or device.type == "cpu":
        config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=128, vocab_size=512, max_position_embeddings=64,
                            **no_dropout)
        batch, seq = 2, 16
    else:
        config = BertConfig(**no_dropout)  # bert-base: 12 layers, 768 wide, 12 heads, vocab 30522
        batch, seq = 8, 512
    torch.manual_seed(0)
    model = BertForMaskedLM(config).to(device=device, dtype=torch.bfloat16).train()
    ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)
    labels = torch.randint(0, config.vocab_size, (batch, seq), device=device)

    def loss(ids, labels):
        return model(input_ids=ids, labels=labels).loss

    params = tuple(p for p in model.parameters() if p.requires_grad)
    return Workload(loss, (ids, labels), grad_leaves=params, tolerance=MODEL_TOLERANCE)


def vit(device, quick):
    from transformers import ViTConfig, ViTForImageClassification

    if quick or device.type == "cpu":
        config = ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=128, image_size=32, patch_size=8)
        batch = 2
    else:
        config = ViTConfig()  # ViT-B/16 at 224: 12 layers, 768 wide
        batch = 64
    torch.manual_seed(0)
    model = ViTForImageClassification(config).to(device=device, dtype=torch.bfloat16).eval()
    x = torch.randn(batch, 3, config.image_size, config.image_size, device=device,
                    dtype=torch.bfloat16)

    def forward(x):
        return model(pixel_values=x).logits

    return Workload(forward, (x,), tolerance=MODEL_TOLERANCE)


def convnext(device, quick):
    from transformers import ConvNextConfig, ConvNextForImageClassification

    if quick or device.type == "cpu":
        config = ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)
        batch, side = 2, 32
    else:
        config = ConvNextConfig()  # convnext-tiny: depths 3-3-9-3, widths 96-768
        batch, side = 64, 224
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    model = ConvNextForImageClassification(config).to(device=device, dtype=dtype)
    model = model.to(memory_format=torch.channels_last).eval()
    x = torch.randn(batch, 3, side, side, device=device, dtype=dtype)
    x = x.contiguous(memory_format=torch.channels_last)

    def forward(x):
        return model(pixel_values=x).logits

    return Workload(forward, (x,), tolerance=MODEL_TOLERANCE)


class _Logits(torch.nn.Module):
    """A transformers image classifier called as torchvision's are: images in, logits out."""

    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(pixel_values=x).logits


def resnet50_train(device, quick, gpu_size=False):
    # gpu_size: the GPU's sizes on the CPU too (python -m solder.bench.memory --gpu-size)
    small = (quick or device.type == "cpu") and not gpu_size
    batch, side = (2, 64) if small else (16, 224)
    torch.manual_seed(0)
    try:
        import torchvision
        model = torchvision.models.resnet50(weights=None)
    except ImportError:
        # torchvision's wheels do not import beside a CPU-only torch: transformers' ResNet
        # with its default configuration is the same network (bottlenecks 3-4-6-3, stride in
        # the 3x3 convolution)
        from transformers import ResNetConfig, ResNetForImageClassification
        model = _Logits(ResNetForImageClassification(ResNetConfig(num_labels=1000)))
    model = model.to(device).train()
    x = torch.randn(batch, 3, side, side, device=device)
    labels = torch.randint(0, 1000, (batch,), device=device)

    def loss(x, labels):
        with torch.autocast(device.type, dtype=torch.bfloat16):
            return torch.nn.functional.cross_entropy(model(x), labels)

    params = tuple(p for p in model.parameters() if p.requires_grad)
    return Workload(loss, (x, labels), grad_leaves=params, tolerance=MODEL_TOLERANCE)


def vit_train(device, quick, gpu_size=False):
    from transformers import ViTConfig, ViTForImageClassification

    if (quick or device.type == "cpu") and not gpu_size:
        config = ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=128, image_size=32, patch_size=8,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        batch = 2
    else:
        config = ViTConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        batch = 16
    torch.manual_seed(0)
    model = ViTForImageClassification(config).to(device).train()
    x = torch.randn(batch, 3, config.image_size, config.image_size, device=device)
    labels = torch.randint(0, config.num_labels, (batch,), device=device)

    def loss(x, labels):
        with torch.autocast(device.type, dtype=torch.bfloat16):
            return model(pixel_values=x, labels=labels).loss

    params = tuple(p for p in model.parameters() if p.requires_grad)
    return Workload(loss, (x, labels), grad_leaves=params, tolerance=MODEL_TOLERANCE)


def resnet18(device, quick):
    # transformers' ResNet with ResNet-18's layout (basic blocks, 2-2-2-2): torchvision's
    # wheels do not import beside a CPU-only torch, and this case runs on both
    from transformers import ResNetConfig, ResNetForImageClassification

    if quick or device.type == "cpu":
        config = ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 128],
                              depths=[2, 2, 2, 2], layer_type="basic")
        batch, side = 2, 64
    else:
        config = ResNetConfig(embedding_size=64, hidden_sizes=[64, 128, 256, 512],
                              depths=[2, 2, 2, 2], layer_type="basic")
        batch, side = 64, 224
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    model = ResNetForImageClassification(config).to(device)
    x = torch.randn(batch, 3, side, side, device=device)
    _calibrate_batchnorm(model, x)
    model = model.to(dtype=dtype, memory_format=torch.channels_last).eval()
    x = x.to(dtype=dtype).contiguous(memory_format=torch.channels_last)

    def forward(x):
        return model(pixel_values=x).logits

    return Workload(forward, (x,), tolerance=MODEL_TOLERANCE)


def bert(device, quick):
    from transformers import BertConfig, BertModel

    if quick or device.type == "cpu":
        # BERT-tiny: 2 layers, 128 wide, 2 heads
        config = BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=512)
        batch, seq, dtype = 2, 128, torch.float32
    else:
        config = BertConfig()  # bert-base
        batch, seq, dtype = 8, 512, torch.bfloat16
    torch.manual_seed(0)
    model = BertModel(config).to(device=device, dtype=dtype).eval()
    ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)

    def forward(ids):
        return model(input_ids=ids).last_hidden_state

    return Workload(forward, (ids,), tolerance=MODEL_TOLERANCE)


def _calibrate_batchnorm(model: torch.nn.Module, x: torch.Tensor) -> None:
    # Random weights with the default running statistics (mean 0, var 1) let activations grow
    # block after block, towards fp16 overflow. One forward pass in train mode with a cumulative
    # average stores this batch's statistics, so the eval-mode network stays normalized.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        model(x)


MODEL_CASES = [
    Case("gpt2", "transformers GPT2LMHeadModel 124M, bf16 inference, batch 8x512", gpt2,
         needs=("transformers",)),
    Case("llama_train", "transformers LlamaForCausalLM 1024 wide, 8 layers, bf16 training step "
         "(forward + loss + backward), batch 4x1024", llama_train, needs=("transformers",)),
    Case("resnet50", "torchvision resnet50, fp16 channels_last inference, batch 64", resnet50,
         needs=("torchvision",)),
    Case("bert_train", "transformers BertForMaskedLM base, bf16 training step (forward + loss + "
         "backward, dropout off), batch 8x512", bert_train, needs=("transformers",)),
    Case("vit", "transformers ViTForImageClassification B/16 224, bf16 inference, batch 64", vit,
         needs=("transformers",)),
    Case("resnet50_train", "torchvision resnet50 training step, bf16 autocast, batch 16 "
         "(transformers' ResNet-50 where torchvision does not import)",
         resnet50_train, needs=("transformers",)),
    Case("vit_train", "transformers ViTForImageClassification B/16 224 training step, bf16 "
         "autocast (dropout off), batch 16", vit_train, needs=("transformers",)),
    Case("convnext", "transformers ConvNextForImageClassification tiny, fp16 channels_last "
         "inference, batch 64", convnext, needs=("transformers",)),
    Case("resnet18", "transformers ResNetForImageClassification, ResNet-18's layout, fp16 "
         "channels_last inference, batch 64", resnet18, needs=("transformers",)),
    Case("bert", "transformers BertModel base, bf16 inference, batch 8x512", bert,
         needs=("transformers",)),
]

"""Real architectures from ``transformers`` (tiny configurations, random weights, nothing
downloaded) compiled with Solder and compared with eager: outputs, and for training the
gradients of every parameter."""
import pytest
import torch

transformers = pytest.importorskip("transformers")
import solder  # noqa: E402

T = transformers


def gpt2():
    cfg = T.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=64)
    return T.GPT2LMHeadModel(cfg), (torch.randint(0, 128, (2, 16)),)


def llama():
    cfg = T.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, vocab_size=128)
    return T.LlamaForCausalLM(cfg), (torch.randint(0, 128, (2, 16)),)


def bert():
    cfg = T.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=128, vocab_size=128)
    return T.BertForMaskedLM(cfg), (torch.randint(0, 128, (2, 16)),)


def vit():
    cfg = T.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=128, image_size=32, patch_size=8)
    return T.ViTForImageClassification(cfg), (torch.randn(2, 3, 32, 32),)


def resnet():
    cfg = T.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                         layer_type="basic")
    return T.ResNetForImageClassification(cfg), (torch.randn(2, 3, 32, 32),)


def convnext():
    cfg = T.ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)
    return T.ConvNextForImageClassification(cfg), (torch.randn(2, 3, 32, 32),)


def _run(model, args, train):
    out = model(*args).logits
    if train:
        out.float().square().mean().backward()
    return out


def _check(make, train):
    torch.manual_seed(0)
    model, args = make()
    model.train(train)
    if train:  # dropout off: its random stream differs from eager's by design
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
    with torch.set_grad_enabled(train):
        ref = _run(model, args, train)
        ref_grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        model.zero_grad(set_to_none=True)
        out = _run(torch.compile(model, backend="solder"), args, train)
    torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-3)
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert len(grads) == len(ref_grads)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("make", [gpt2, llama, bert, vit, resnet, convnext])
def test_inference(make):
    _check(make, train=False)


@pytest.mark.parametrize("make", [gpt2, llama, bert, vit])
def test_training(make):
    _check(make, train=True)


@pytest.mark.slow
@pytest.mark.parametrize("make", [resnet, convnext])
def test_training_convnets(make):
    _check(make, train=True)


def test_new_sequence_length_reuses_the_symbolic_graph():
    torch.manual_seed(0)
    model, _ = gpt2()
    model.eval()
    compiles = {"n": 0}

    def counting(gm, inputs, **kw):
        compiles["n"] += 1
        return solder.compile_backend(gm, inputs)
    compiled = torch.compile(model, backend=counting)
    with torch.no_grad():
        for t in (8, 12, 16):
            ids = torch.randint(0, 128, (2, t))
            torch.testing.assert_close(compiled(ids).logits, model(ids).logits, rtol=1e-3,
                                       atol=1e-3)
    assert compiles["n"] == 2  # static at first, then one graph with a symbolic length


def test_explain_lists_no_fallbacks_for_gpt2():
    model, args = gpt2()
    model.eval()
    with torch.no_grad():
        report = solder.explain(model, *args)
    assert not report.fallbacks, report.fallbacks
    assert report.kernel_count > 0

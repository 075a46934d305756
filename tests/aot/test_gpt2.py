"""A tiny transformers GPT-2 (random weights, nothing downloaded) through a package: logits
match eager at the exported batch size and at another one in the declared range."""
import pytest
import torch

import solder.aot as aot

transformers = pytest.importorskip("transformers")


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(ids, use_cache=False).logits


def tiny_gpt2():
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=64)
    return Logits(transformers.GPT2LMHeadModel(cfg)).eval()


def test_gpt2_inference_matches_eager(tmp_path, device):
    torch.manual_seed(0)
    model = tiny_gpt2().to(device)
    ids = torch.randint(0, 128, (2, 16), device=device)
    batch = torch.export.Dim("batch", min=1, max=8)
    path = aot.compile(model, (ids,), tmp_path / "gpt2.solder", dynamic_shapes=({0: batch},))
    run = aot.load(path)
    for b in (2, 3):
        ids = torch.randint(0, 128, (b, 16), device=device)
        with torch.no_grad():
            torch.testing.assert_close(run(ids), model(ids), rtol=1e-4, atol=1e-4)
    with pytest.raises(aot.PackageInputError, match="input ids: dimension 1 must be 16"):
        run(torch.randint(0, 128, (2, 17), device=device))


def test_a_static_gpt2_package_folds_the_causal_mask(tmp_path, device, caplog):
    # exported at one size, transformers' causal mask is a constant: the package runs SDPA with
    # is_causal=True (capture/attention_masks.py) and still gives eager's logits
    import logging
    torch.manual_seed(0)
    model = tiny_gpt2().to(device)
    ids = torch.randint(0, 128, (2, 16), device=device)
    with caplog.at_level(logging.INFO, logger="solder.aot"):
        run = aot.load(aot.compile(model, (ids,), tmp_path / "gpt2_static.solder"))
    assert sum("causal: is_causal=True" in r.getMessage() for r in caplog.records) == 2
    with torch.no_grad():
        torch.testing.assert_close(run(ids), model(ids), rtol=1e-4, atol=1e-4)

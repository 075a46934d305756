import pytest

from solder.config import Config, resolve


def test_defaults_env_and_options(monkeypatch):
    monkeypatch.setenv("SOLDER_PERSISTENT_REDUCTION_MAX", "128")
    monkeypatch.setenv("SOLDER_FUSE", "0")
    cfg = resolve({"inline_max_ops": 7})
    assert cfg.persistent_reduction_max == 128 and cfg.fuse is False and cfg.inline_max_ops == 7


def test_unknown_option_is_an_error():
    with pytest.raises(ValueError, match="unknown Solder option"):
        Config().replace(not_a_setting=1)


def test_bad_boolean_is_an_error():
    with pytest.raises(ValueError, match="expected a boolean"):
        Config().replace(fuse="maybe")


def test_codegen_key_tracks_codegen_fields_only():
    a, b = Config(), Config().replace(debug_dir="/tmp/x")
    assert a.codegen_key() == b.codegen_key()
    assert a.codegen_key() != Config().replace(fuse=False).codegen_key()


def test_a_misspelt_variable_is_named_with_the_closest_setting(monkeypatch, caplog):
    import logging
    from solder import config as config_mod
    monkeypatch.setenv("SOLDER_CHEK_INDICES", "0")
    monkeypatch.setattr(config_mod, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="solder"):
        cfg = config_mod.resolve()
        config_mod.resolve()
    said = [r.getMessage() for r in caplog.records if "SOLDER_CHEK_INDICES" in r.getMessage()]
    assert len(said) == 1 and "SOLDER_CHECK_INDICES" in said[0]
    assert cfg.check_indices is True   # the misspelt one changed nothing


def test_modes_unknown_is_an_error_and_unhonoured_ones_are_said_once(monkeypatch, caplog):
    import logging
    import importlib
    import pytest
    backend = importlib.import_module("solder.backend")
    with pytest.raises(ValueError, match="unknown mode.*reduce-overhead"):
        backend.check_mode("nonsense")
    monkeypatch.setattr(backend, "_modes_noted", set())
    with caplog.at_level(logging.WARNING, logger="solder"):
        backend.check_mode("max-autotune")
        backend.check_mode("max-autotune")
        backend.check_mode("reduce-overhead")   # honoured: CUDA graphs
        backend.check_mode("default")
        backend.check_mode(None)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "max-autotune" in said[0] and "matmul templates" in said[0]


def test_reduce_overhead_reaches_the_backend_and_turns_cuda_graphs_on(monkeypatch):
    import torch
    from solder import backend
    seen = []
    real = backend.config_mod.resolve

    def resolve(options=None):
        cfg = real(options)
        seen.append(cfg.cuda_graphs)
        return cfg
    monkeypatch.setattr(backend.config_mod, "resolve", resolve)
    torch._dynamo.reset()
    torch.compile(lambda x: x.sin() + 1, backend="solder", mode="reduce-overhead")(
        torch.randn(4, device="cpu"))
    torch._dynamo.reset()
    torch.compile(lambda x: x.cos() + 1, backend="solder")(torch.randn(4, device="cpu"))
    torch._dynamo.reset()
    assert seen == [True, False]

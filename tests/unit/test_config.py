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

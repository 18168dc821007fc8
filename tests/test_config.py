"""Configs: validation names the field at fault; ids are stable and discriminating."""
import pytest

from mss_device.params import Params
from mss_protocol.config_file import ConfigError
from mss_protocol.mss.config import MssConfig


@pytest.mark.parametrize("k,moduli,match", [
    (64, [60, 62], "not coprime"),
    (64, [64, 63], r"must be in \[2, k\)"),
    (1000, [7, 11], "below k"),
    (3, [2], "at least 4"),
    (64, [], "empty"),
])
def test_bad_moduli(k, moduli, match):
    with pytest.raises(ConfigError, match=match):
        MssConfig.build(k, 1.0, moduli)


def test_bad_epsilon():
    with pytest.raises(ConfigError, match="epsilon"):
        MssConfig.build(64, 0.0, [59, 61])


def test_config_id_is_stable_and_covers_the_channel():
    a = MssConfig.build(64, 1.0, [59, 61, 63])
    assert a.config_id == MssConfig.build(64, 1.0, [59, 61, 63]).config_id
    assert a.config_id != MssConfig.build(64, 1.0, [59, 61, 62]).config_id
    assert a.config_id != MssConfig.build(64, 1.5, [59, 61, 63]).config_id  # thresholds differ


def test_file_round_trip_and_device_params_agree(tmp_path):
    cfg = MssConfig.build(1024, 4.0, [1019, 1021, 1022, 1023])
    cfg.save(tmp_path / "cfg.json")
    assert MssConfig.load(tmp_path / "cfg.json") == cfg
    params = Params(cfg.to_dict())
    assert params.config_id == cfg.config_id and params.jbits == cfg.jbits


def test_device_params_reject_tampering():
    d = MssConfig.build(64, 1.0, [59, 61, 63]).to_dict()
    d["moduli"] = [59, 61, 62]
    with pytest.raises(ValueError, match="config_id"):
        Params(d)


@pytest.mark.parametrize("field", ["k", "moduli", "config_id"])
def test_missing_field_is_named(field):
    d = MssConfig.build(64, 1.0, [59, 61, 63]).to_dict()
    del d[field]
    with pytest.raises(ConfigError, match=field):
        MssConfig.from_dict(d)

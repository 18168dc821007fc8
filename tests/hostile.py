"""Hostile configs for the loader tests: each well formed, with a config id that
matches its integers (so only the new checks can refuse it), and the reason a
device must give.  The board's cap in these tests is epsilon 2."""
from mss_protocol.config_vectors import mss, retag  # noqa: F401 (retag: the tests' helper)
from mss_protocol.mss.config import MssConfig
from mss_protocol.privacy import ONE, cap

KEY = bytes.fromhex("0f1e2d3c4b5a69788796a5b4c3d2e1f0")
OTHER_KEY = bytes(16)
CAP = 2.0


def device(**extra):
    """A device section with the fleet key and the cap of epsilon 2."""
    return dict({"fleet_key": KEY.hex(), "max_epsilon": CAP, "max_ratio": cap(CAP)}, **extra)


GOOD = MssConfig.build(64, 1.0, [59, 61, 63]).to_dict()


def _wrong_rank_bits():
    """Another config (so a board on GOOD would switch to it), one rank width off (not in the id)."""
    d = MssConfig.build(64, 1.5, [55, 59, 61, 62]).to_dict()
    d["rank_bits"][1] += 1
    return d


# name -> (config dict, what the refusal says)
HOSTILE = {
    "above-cap": (MssConfig.build(64, 4.0, [59, 61, 63]).to_dict(),
                  r"thresholds give epsilon 4, above device.max_epsilon 2"),
    "contradicts-epsilon": (mss(64, 1.0, [59, 61, 63], GOOD["omegas"], [ONE - 1] * 3),
                            r"thresholds give epsilon 21\.8\d*, more than its epsilon 1"),
    "threshold-below-uniform": (mss(64, 1.0, [59, 61, 63], GOOD["omegas"], [1] * 3),
                                r"thresholds give epsilon 19\.8\d*, more than its epsilon 1"),
    "modulus-above-k": (mss(64, 1.0, [59, 61, 67], [15, 15, 16]),
                        r"config field moduli must be an integer in \[2, 63\]"),
    "modulus-9000000": (mss(64, 1.0, [9000000, 61], [1, 15]),
                        r"config field moduli must be an integer in \[2, 63\]"),
    "modulus-above-2**23": (mss(10_000_000, 1.0, [9000000, 7], [1, 2]),
                            r"config field moduli must be an integer in \[2, 8388608\]"),
    "moduli-not-coprime": (mss(64, 1.0, [60, 62], [15, 15]), r"moduli 60 and 62 are not coprime"),
    "wrong-rank-bits": (_wrong_rank_bits(), r"config field rank_bits do not match the moduli and omegas"),
}

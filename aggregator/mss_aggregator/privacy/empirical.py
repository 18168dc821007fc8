"""Empirical epsilon lower bounds from a distinguishing test (ldp-audit style).

Run the randomiser n1 times on x1 and n2 times on x2, count how often a
test event E holds on the reports (tp of n1, fp of n2).  With one-sided
Clopper-Pearson bounds at confidence 1 - alpha/2 each,

    eps_lb = ln(TPR_low / FPR_high)

is a lower bound on the true epsilon with probability at least 1 - alpha
(Arcolezi & Gambs, "Revisiting Locally Differentially Private Protocols:
Towards Better Trade-offs in Privacy, Utility, and Attack Resistance",
PETS 2024 / ldp-audit).  It is computed on the exact wire bytes, so an
implementation leak (e.g. report order) is seen, not just the design.
"""
import math


def clopper_pearson(successes, n, alpha):
    """Two-sided (1 - alpha) Clopper-Pearson interval (low, high) for a proportion: the
    Beta(s, n - s + 1) quantile alpha/2 and the Beta(s + 1, n - s) quantile 1 - alpha/2,
    as the inverse regularised incomplete beta function (scipy.stats.beta.ppf's own
    kernel, equal to it to the last bit; importing scipy.stats took ~1 s of `mss plan`)."""
    from scipy.special import betaincinv

    low = 0.0 if successes == 0 else float(betaincinv(successes, n - successes + 1, alpha / 2))
    high = 1.0 if successes == n else float(betaincinv(successes + 1, n - successes, 1 - alpha / 2))
    return low, high


def epsilon_lower_bound(tp, n1, fp, n2, alpha=0.001):
    """ln(TPR_low / FPR_high), each bound one-sided at alpha/2 (0 if not positive)."""
    tpr_low = clopper_pearson(tp, n1, alpha)[0]
    fpr_high = clopper_pearson(fp, n2, alpha)[1]
    if tpr_low <= 0:
        return 0.0
    return max(0.0, math.log(tpr_low / fpr_high))


# -- the audit of real clients ----------------------------------------------
# Inputs 0 and 1 differ in every residue (m_j >= 2) and in every other protocol.
X1, X2 = 0, 1
# The epoch every audited report is drawn in (the host clients' headers carry epoch 0,
# MssProtocol.randomise; the firmware is told it, mss_node.emit's EPOCH), and each report
# is decoded as sent in that epoch: the link epoch a compact kind needs (SPEC.md section 4)
# is the drawing epoch, as on LoRaWAN, where it is the epoch of the network server's
# receive time (section 11) and a board sends its report in the epoch it drew it in; a
# compact-epoch frame's low bits resolve to it, a full frame carries its own.
DRAW_EPOCH = 0


def distinguishing_hits(ch, wire_reports, x1=X1, x2=X2, epoch=DRAW_EPOCH):
    """How many reports support x1 but not x2: the event whose probability
    ratio between inputs x1 and x2 is the channel's largest (e^eps for a
    correct client).  Every report is parsed from its exact wire output,
    ``epoch`` the link's (compact frames)."""
    hits = 0
    for data in wire_reports:
        mask = ch.support(ch.parse(data, epoch))[0]
        hits += bool(mask[x1]) and not mask[x2]
    return hits


def host_reports(ch, x, n, rng):
    """n wire outputs of the protocol's integer client for value x."""
    return [ch.wire(x, rng) for _ in range(n)]


def firmware_reports(cfg, x, n, runtime="micropython", timeout=3600, device_id=None, epoch=DRAW_EPOCH):
    """n report bytes for value x from the firmware (``mss_node.emit``, every
    protocol's device module through ``mss_node.reporter``) under ``runtime``,
    with the runtime's own os.urandom, drawn in ``epoch``; ``device_id`` the
    board's id (olh's seed)."""
    import os
    import tempfile

    from mss_aggregator.devices.runtime import run_module

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "config.json")
        cfg.save(path)
        args = [path, x, n, epoch] + (["--device", device_id] if device_id else [])
        out = run_module(runtime, "mss_node.emit", args, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"firmware under {runtime} failed: {out.stderr.strip()[-500:]}")
    return [bytes.fromhex(line) for line in out.stdout.split()]


AUDIT_DEVICE = "audit"


def _olh_device(codec, x1, x2):
    """A device id whose OLH hash seed (at DRAW_EPOCH) tells x1 and x2 apart, so that the
    distinguishing event can hold (the seed of every report of one device at one
    epoch, or of every epoch with ``seed: device``, is the same)."""
    proto = codec.cfg.protocol
    proto = proto.prr or proto
    for i in range(1000):
        dev = f"{AUDIT_DEVICE}{i}"
        a, b = codec.decode(codec.encode(0, DRAW_EPOCH), dev, DRAW_EPOCH).subset[:2]
        if proto.hash(a, b, x1) != proto.hash(a, b, x2):
            return dev
    raise RuntimeError("no device id separates the two inputs")  # (g >= 2: 1000 tries never all collide)


def firmware_channel_reports(ch, cfg, x, n, runtime="micropython", timeout=3600, x1=X1, x2=X2):
    """n firmware reports of value x (:func:`firmware_reports`) of device config
    ``cfg`` for its channel ``ch``: the wire bytes for MSS/SS (their channel parses
    them, with the link epoch DRAW_EPOCH), else each report decoded by the aggregator's
    strict codec, with that link epoch, into what the channel reads (the point; olh's
    (a, b, y); the unary body)."""
    from mss_protocol.codec import codec as codec_of
    from mss_protocol.oracle_config import OracleConfig

    if not isinstance(cfg, OracleConfig):  # mss, ss: bytes, parsed by the channel
        return firmware_reports(cfg=cfg, x=x, n=n, runtime=runtime, timeout=timeout)
    codec = codec_of(cfg)
    dev = _olh_device(codec, x1, x2) if cfg.protocol.has_seed else AUDIT_DEVICE
    return [ch.from_decoded(codec.decode(data, dev, DRAW_EPOCH), data)
            for data in firmware_reports(cfg=cfg, x=x, n=n, runtime=runtime, timeout=timeout, device_id=dev)]


def audit_client(ch, reports_x1, reports_x2, epsilon, alpha=0.001):
    """The ldp-audit row for one client: counts, Clopper-Pearson epsilon lower
    bound, and whether it stays within the claimed ``epsilon``."""
    tp = distinguishing_hits(ch, reports_x1)
    fp = distinguishing_hits(ch, reports_x2)
    lb = epsilon_lower_bound(tp=tp, n1=len(reports_x1), fp=fp, n2=len(reports_x2), alpha=alpha)
    return {"trials": len(reports_x1), "tp": tp, "fp": fp, "eps_lower_bound": lb,
            "within_epsilon": lb <= epsilon}

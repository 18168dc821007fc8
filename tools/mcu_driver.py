"""Per-report device cost of one config: the benchmark driver of tools/bench_mcu.py.

Frozen into the Cortex-M images (ports/qemu) and run unchanged on the unix
port (MICROPYPATH=firmware/lib:tools).  ``run(cfg_json, ...)`` builds the
config's client, draws reports ``client.report(x, rng, epoch, seq)`` with
x = (i * 7919) % k from a deterministic byte stream (SHA-256 in counter
mode: the qemu port has no os.urandom) and prints one line
``RESULT {json}``:

* ``instr_med`` / ``instr_min`` / ``instr_max``: instructions per report
  (ticks_us * 1000: under ``qemu -icount shift=0`` one instruction is 1 ns);
  reports are timed in groups of ``group`` (ticks_us resolves 1000
  instructions only) and each group's figure is divided by ``group``
  (``instr_mean``: all timed instructions / reports);
* ``heap_max``: heap bytes allocated per report (gc disabled, the
  largest group's gc.mem_alloc delta / group);
* ``report_len`` (max bytes), ``rand_bytes`` (random bytes per report),
  ``reports`` (timed), ``samples`` (groups), ``refills`` (groups in which the
  reserved pool ran dry and the stream was read: their time includes SHA-256
  refills), ``digest`` (SHA-256 of every report drawn, the two warm-ups included).

The random bytes a group needs are reserved before it is timed (learnt from
the warm-up reports, with a margin of 4x).  On the host the device's ``group`` and
``reports`` are passed back in, so the unix port draws the same reports and
the digests compare bit for bit.
"""
import gc
import hashlib
import json
import time

from mss_device.params import Params
from mss_device.rng import ByteRng

DEVICE_ID = "bench-0001"
MIN_GROUP_INSTR = 100000  # a timed group is at least this many instructions
RESERVE_CAP = 32768  # bytes: the M0 image's heap is 140 KB and reserve() copies the pool


class CounterStream:
    """Bytes of SHA-256(seed || counter as 4 big-endian bytes), counter = 0, 1, ...

    The stream does not depend on how it is read; ``reads`` counts the calls.
    A read that raises (MemoryError on the M0 heap) leaves the stream where it
    was, and ``mark()`` / ``rewind()`` put back bytes read but then lost by the
    caller: the bytes a report sees never depend on how much heap there was.
    """

    def __init__(self, seed=b"mss-bench"):
        self._seed = seed
        self._ctr = 0
        self._buf = b""
        self.reads = 0

    def read(self, n):
        self.reads += 1
        buf, c = self._buf, self._ctr
        out = bytearray(n)  # the one large allocation (no regrowth while filling)
        pos = min(n, len(buf))
        out[0:pos] = buf[0:pos]
        rest = buf[pos:]
        while pos < n:
            d = hashlib.sha256(self._seed + bytes([c >> 24, (c >> 16) & 255, (c >> 8) & 255, c & 255])).digest()
            c += 1
            m = min(32, n - pos)
            out[pos:pos + m] = d if m == 32 else d[0:m]
            rest = d[m:]
            pos += m
        self._ctr, self._buf = c, rest  # committed only once nothing more can fail
        return out

    def mark(self):
        return self._ctr, self._buf

    def rewind(self, mark):
        self._ctr, self._buf = mark


def _reserve(rng, stream, need):
    """Pool ``need`` bytes (at most RESERVE_CAP): fewer when the heap cannot hold them.

    ByteRng.reserve may raise MemoryError after ``stream`` was read (``left +=
    more``); its pool and count change only on success, and the stream is
    rewound here, so a failed attempt draws no bytes.  Without this the M0
    skipped the bytes of every failed 32 KB attempt and its reports differed
    from the unix port's, which has the heap for them.
    """
    need = min(need, RESERVE_CAP)
    while need >= 64:
        mark = stream.mark()
        try:
            rng.reserve(need)
            return
        except MemoryError:
            stream.rewind(mark)
            gc.collect()
            need //= 2


def _group_size(instr):
    """Reports per timed group so that a group is >= MIN_GROUP_INSTR instructions."""
    return max(1, (MIN_GROUP_INSTR + instr - 1) // max(1, instr))


class Bench:
    """A client, its byte stream and the running digest of the reports it drew."""

    def __init__(self, cfg):
        self.params = Params(cfg)
        self.client = self.params.client()
        self.client.device_id = DEVICE_ID  # as mss_node.reporter.Reporter does: OLH's seed
        self.stream = CounterStream()
        self.rng = ByteRng(self.stream.read)
        self.digest = hashlib.sha256()
        self.drawn = 0
        self.max_len = 0

    def draw(self):
        """One untimed report: (instructions, random bytes) it took."""
        c0 = self.rng.consumed
        t0 = time.ticks_us()
        out = self.client.report((self.drawn * 7919) % self.params.k, self.rng, 1, self.drawn)
        t1 = time.ticks_us()
        self._keep(out)
        return time.ticks_diff(t1, t0) * 1000, (self.rng.consumed - c0) & 0x3FFFFFFF

    def _keep(self, out):
        self.digest.update(out)
        self.drawn += 1
        if len(out) > self.max_len:
            self.max_len = len(out)

    def group(self, g, slots):
        """Time ``g`` consecutive reports: (instructions, heap bytes, refilled)."""
        k = self.params.k
        client, rng = self.client, self.rng
        base = self.drawn
        reads = self.stream.reads
        gc.collect()
        gc.disable()
        try:
            a0 = gc.mem_alloc()
            t0 = time.ticks_us()
            for j in range(g):
                i = base + j
                slots[j] = client.report((i * 7919) % k, rng, 1, i)
            t1 = time.ticks_us()
            a1 = gc.mem_alloc()
        finally:  # a MemoryError must not leave the collector off for the configs after it
            gc.enable()
        for j in range(g):
            self._keep(slots[j])
            slots[j] = None
        return time.ticks_diff(t1, t0) * 1000, a1 - a0, self.stream.reads != reads


def run(cfg_json, name="", n_max=101, budget=2000000000, min_samples=5, group=0, reports=0):
    """Measure the config ``cfg_json`` and print ``RESULT {json}``.

    Stops after ``n_max`` timed reports, or once ``budget`` instructions were
    timed and ``min_samples`` groups taken.  ``group`` and ``reports`` (both
    non-zero) fix the group size and the number of timed reports instead (the
    unix port's replay of a device run).
    """
    res = {"name": name}
    try:
        res.update(_measure(json.loads(cfg_json), n_max, budget, min_samples, group, reports))
    except Exception as exc:  # a config the device refuses or cannot hold: say so, go on
        res["error"] = "%s: %s" % (type(exc).__name__, exc)
    print("RESULT " + json.dumps(res))


def _measure(cfg, n_max, budget, min_samples, group, reports):
    b = Bench(cfg)
    _, used = b.draw()  # warm-up: first-call costs; random bytes per report
    instr, more = b.draw()  # a second one sets the group size
    used = max(used, more)
    fixed = group > 0
    g = group if fixed else _group_size(instr)
    slots = [None] * g
    per, heap, spent, refills, timed = [], 0, 0, 0, 0
    while True:
        if fixed:
            if timed >= reports:
                break
        elif timed >= n_max or (spent >= budget and len(per) >= min_samples):
            break
        n = min(g, reports - timed) if fixed else min(g, n_max - timed)
        c0 = b.rng.consumed
        _reserve(b.rng, b.stream, 4 * n * used + 1024)
        t, a, refilled = b.group(n, slots)
        used = max(used, (((b.rng.consumed - c0) & 0x3FFFFFFF) + n - 1) // n)
        per.append(t // n)
        heap = max(heap, (a + n - 1) // n)
        spent += t
        refills += refilled
        timed += n
    per.sort()
    return {"instr_med": per[len(per) // 2], "instr_min": per[0], "instr_max": per[-1],
            "instr_mean": spent // timed,
            "heap_max": heap, "report_len": b.max_len, "rand_bytes": used, "reports": timed,
            "group": g, "samples": len(per), "refills": refills,
            "digest": "".join(["%02x" % c for c in b.digest.digest()])}

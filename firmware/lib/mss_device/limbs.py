"""The colex rank of an MSS / SS subset in limbs: the device's one hot loop.

rank(Z) = sum_i C(c_i, i) for Z = {c_1 < ... < c_omega} (SPEC.md section 4)
is far above 2**30, so it is kept as little-endian limbs of RB bits in
caller-owned ``array('I')`` buffers (RB = 15 for moduli up to 2**15, else 7):
no big integer, no allocation.  One pass over c = 0 .. m - 1 keeps
b = C(c, i) for the next element index i, updated by the exact ratios
C(c + 1, i) = C(c, i) (c + 1) / (c + 1 - i) and, after an element,
C(c + 1, i + 1) = C(c, i) (c + 1) / (i + 1).  Two things make it cheap:

* b = B * 2**e with B odd: the powers of two of the factors go to e, so
  every division is by an odd number and is exact, done as a
  multiplication by its inverse modulo 2**RB (Jebelean's exact division,
  low limb first).  The multiply and the divide then run in the same
  direction and share one pass; no division instruction (a Cortex-M0 has
  none) touches a limb.
* with RB = 15 the odd parts of successive factors are multiplied into
  N and D while both stay <= 2**15, and b is updated only when they are
  full or an element needs b itself.

Every intermediate stays below 2**30, so the code is the same with or
without the viper emitter: with it (``@micropython.viper``: rp2, esp32,
unix ports) it runs as machine code; a port without the native emitter
gets this file with the decorator lines removed (``mss deploy``);
CPython runs it as plain Python.
"""
from mss_device.rng import micropython, ptr8, ptr32


@micropython.viper
def rank(b: ptr32, total: ptr32, mark: ptr8, arg: ptr32) -> int:
    """Colex rank of the omega-subset of [0, m) set in ``mark`` (bit v & 7 of
    byte v >> 3) into ``total``; returns its limb count.

    ``arg`` = [m, omega, RB, size]: ``total`` and ``b`` hold ``size`` limbs,
    room for C(m, omega) plus one factor.  Raises ValueError when mark holds
    fewer than omega elements."""
    m = arg[0]
    omega = arg[1]
    rb = arg[2]
    mask = (1 << rb) - 1
    top = 1 << (30 - rb)  # n, d <= top keeps limb * n + carry below 2**30
    k = 0
    while k < arg[3]:
        total[k] = 0
        b[k] = 0
        k += 1
    nt = 0
    nb = 0  # limbs of B; b = C(c, i) = 0 for c < i, until C(i, i) = 1
    e = 0
    n = 1  # pending factors: b(c) = B * n / d * 2**e
    d = 1
    i = 1
    c = 0
    while c < m:
        hit = mark[c >> 3] & (1 << (c & 7))
        if nb:
            f = c + 1  # this step's factors: C(c + 1, i + 1) after an element, else C(c + 1, i)
            g = i + 1 if hit else c + 1 - i
            de = 0
            while not f & 1:
                f >>= 1
                de += 1
            while not g & 1:
                g >>= 1
                de -= 1
            if hit or rb != 15 or n * f > top or d * g > top:
                if n > 1 or d > 1:  # B = B * n / d in one pass, low limb first
                    dm = d & mask  # x = 1 / d modulo 2**rb: d * d = 1 mod 8, each Newton step doubles the bits
                    x = (dm * (2 - ((dm * dm) & mask))) & mask
                    x = (x * (2 - ((dm * x) & mask))) & mask
                    x = (x * (2 - ((dm * x) & mask))) & mask
                    # r = (the product so far - the quotient so far * d) / 2**(rb k): the
                    # multiplication's carry and the division's borrow in one number
                    r = 0
                    k = 0
                    while k + 1 < nb:  # two limbs a turn: half the loop overhead
                        v = b[k] * n + r
                        q = ((v & mask) * x) & mask
                        b[k] = q
                        v = b[k + 1] * n + ((v - q * d) >> rb)
                        q = ((v & mask) * x) & mask
                        b[k + 1] = q
                        r = (v - q * d) >> rb
                        k += 2
                    if k < nb:
                        v = b[k] * n + r
                        q = ((v & mask) * x) & mask
                        b[k] = q
                        r = (v - q * d) >> rb
                        k += 1
                    while r:  # the quotient's top limbs: r = d * (what is left of it)
                        q = ((r & mask) * x) & mask
                        b[k] = q
                        r = (r - q * d) >> rb
                        k += 1
                    nb = k
                    while not b[nb - 1]:
                        nb -= 1
                if hit:  # total += B << e, e = el limbs + eb bits
                    el = 0
                    eb = e
                    while eb >= rb:
                        eb -= rb
                        el += 1
                    hi = 0  # the bits shifted out of the limb below
                    carry = 0
                    k = el
                    while k < nb + el:
                        w = (b[k - el] << eb) + hi
                        t = total[k] + (w & mask) + carry
                        total[k] = t & mask
                        hi = w >> rb
                        carry = t >> rb
                        k += 1
                    carry += hi
                    while carry:
                        t = total[k] + carry
                        total[k] = t & mask
                        carry = t >> rb
                        k += 1
                    if k > nt:
                        nt = k
                    if i == omega:
                        return nt
                    i += 1
                n = f
                d = g
            else:
                n *= f
                d *= g
            e += de
        elif hit:  # C(c, i) = 0
            if i == omega:
                return nt
            i += 1
        elif c + 1 == i:
            b[0] = 1  # C(i, i)
            nb = 1
        c += 1
    raise ValueError("mark holds fewer than omega elements")


@micropython.viper
def put(out: ptr8, total: ptr32, nt: int, arg: ptr32):
    """OR the low arg[1] bits of the number in ``total`` (nt limbs of arg[2]
    bits) into ``out`` from bit arg[0] on, most significant first (bit 0 is
    the top bit of byte 0)."""
    pos = arg[1]
    rb = arg[2]
    k = arg[0]
    limb = 0
    s = pos - 1
    while s >= rb:
        s -= rb
        limb += 1
    while pos:
        if limb < nt and (total[limb] >> s) & 1:
            out[k >> 3] = out[k >> 3] | (0x80 >> (k & 7))
        k += 1
        pos -= 1
        s -= 1
        if s < 0:
            s = rb - 1
            limb -= 1

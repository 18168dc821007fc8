"""The manipulation coefficient of every protocol, as docs/privacy.md's table (section 7).

shift_per_report(1) (:meth:`mss_protocol.base.Protocol.shift_per_report`): the largest change one
crafted report makes to one item's n fhat; 1% of the devices compromised move one item's estimate
by 0.01 x that.  Usage: ``python tools/shift_table.py`` (a markdown table on stdout, ~2 s).
"""
from mss_protocol import registry

KS = (16, 1024)
EPSILONS = (1.0, 2.0, 4.0)


def shift_rows():
    """[(protocol, {(k, eps): shift_per_report(1)})] for every registered protocol."""
    rows = []
    for name in registry.AVAILABLE:
        cells = {}
        for k in KS:
            for eps in EPSILONS:
                cells[(k, eps)] = registry.make(name, k, eps).shift_per_report(1)
        rows.append((name, cells))
    return rows


def main():
    cols = [(k, eps) for k in KS for eps in EPSILONS]
    print("| protocol | " + " | ".join(f"k={k}, eps {eps:g}" for k, eps in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for name, cells in shift_rows():
        print(f"| {name} | " + " | ".join(f"{cells[c]:.3g}" for c in cols) + " |")


if __name__ == "__main__":
    main()

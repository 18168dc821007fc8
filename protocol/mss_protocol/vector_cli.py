"""The command line of a vector file's module: ``--write PATH`` makes the file(s), ``--check PATH``
reads them back and prints what disagrees (exit 1) or ``ok`` (exit 0)."""
import argparse


def vector_main(argv, doc, write, check, ok):
    """Run ``write(path)`` and/or ``check(path)`` (a list of disagreements) as ``argv`` asks;
    ``ok(path)``: the line printed when nothing disagrees.  Returns the exit status."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", metavar="PATH")
    ap.add_argument("--check", metavar="PATH")
    args = ap.parse_args(argv)
    if args.write:
        write(args.write)
    if args.check:
        errors = check(args.check)
        print("\n".join(errors) or ok(args.check))
        return 1 if errors else 0
    return 0

"""Device side of ModularSubsetSelection: integer-only, runs on MicroPython and CPython."""

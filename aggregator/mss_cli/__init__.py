"""The ``mss`` command line."""

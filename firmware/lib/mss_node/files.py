"""Small JSON files in flash, written atomically (write a temp file, rename).

A power cut or reset at any point of :func:`save` leaves the old file or the
new one, whole: while the temp file is written the old file is untouched (a
torn temp file is never read while the old one is there); between the remove
and the rename the complete temp file is the file (:func:`load` reads it,
the next save renames it into place before writing a new temp file).
"""
import json
import os


def load(path, default=None):
    """The file's JSON; else the complete temp file a power cut left behind
    between ``save``'s remove and rename; else ``default``."""
    for candidate in (path, path + ".tmp"):
        try:
            with open(candidate) as fh:
                return json.load(fh)
        except (OSError, ValueError):
            pass
    return default


def save(path, obj):
    tmp = path + ".tmp"
    try:
        os.stat(path)
    except OSError:  # cut between remove and rename: the temp file is the file, keep it
        try:
            os.rename(tmp, path)
        except OSError:
            pass
    with open(tmp, "w") as fh:
        json.dump(obj, fh)
    try:
        os.remove(path)  # MicroPython's rename does not replace on every port
    except OSError:
        pass
    os.rename(tmp, path)

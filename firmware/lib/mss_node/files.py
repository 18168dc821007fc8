"""Small JSON files in flash, written atomically (write a temp file, rename)."""
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
    with open(tmp, "w") as fh:
        json.dump(obj, fh)
    try:
        os.remove(path)  # MicroPython's rename does not replace on every port
    except OSError:
        pass
    os.rename(tmp, path)

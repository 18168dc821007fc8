"""Files written whole or not at all (provisioning output, a campaign config written back)."""
import os
import tempfile
from pathlib import Path


def write_atomically(path, text, mode=None):
    """Write ``text`` to ``path`` through a temporary file beside it, renamed over it, so a
    reader never sees half a file; ``mode`` (default: the file's own, else 0644) set first.
    OSError propagates, the temporary file removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

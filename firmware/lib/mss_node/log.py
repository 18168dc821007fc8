"""Board log: printed to the console and appended to a bounded file in flash."""
import time

_LIMIT = 8192
_path = None


def to_file(path):
    global _path
    _path = path


def log(level, msg):
    line = "%d [%s] %s" % (int(time.time()), level, msg)
    print(line)
    if _path is None:
        return
    try:
        try:
            import os

            if os.stat(_path)[6] > _LIMIT:  # keep one previous file
                os.rename(_path, _path + ".1")
        except OSError:
            pass
        with open(_path, "a") as fh:
            fh.write(line + "\n")
    except OSError:
        pass


def info(msg):
    log("info", msg)


def warn(msg):
    log("warn", msg)


def error(msg):
    log("error", msg)

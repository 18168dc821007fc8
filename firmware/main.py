# The board's application: report the sensor's category once per period.
# Nothing escapes: on an unexpected error the board logs it and resets.
from mss_node import log

try:
    log.to_file("log.txt")
    from mss_node import app
    from sensor import read_category

    app.run(sensor=read_category)
except Exception as exc:
    log.error("fatal: %r" % (exc,))
    try:
        import machine
        import time

        time.sleep(10)
        machine.reset()
    except ImportError:
        pass

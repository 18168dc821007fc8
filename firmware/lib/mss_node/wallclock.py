"""The board's wall clock against unix time (``time.time()`` plus ``UNIX_OFFSET``).

``UNIX_OFFSET``: seconds from 1970 to the port's epoch (ESP32, ESP8266 and
STM32 count seconds from 2000, unix and rp2 from 1970).  ``CLOCK_SANE``:
2024-01-01; a clock before it was never set.  :mod:`mss_node.app`,
:mod:`mss_node.pace` and :mod:`mss_node.auth` read both.  Plain globals, not
``const()``: MicroPython folds a constant only inside its own module, and
this one uses neither (``const`` would add its import, 46 B compiled).
"""
import time

UNIX_OFFSET = 946684800 if time.gmtime(0)[0] == 2000 else 0
CLOCK_SANE = 1704067200

"""Emulated devices: the real firmware (``firmware/lib``) run as processes.

:mod:`.runtime` runs a firmware module under the MicroPython unix port or
CPython (with ``cpython_umqtt``, umqtt.simple's API over paho-mqtt);
:mod:`.fleet` starts many such devices against a broker (``mss fleet``,
``mss demo``), each reporting once (``mss fleet --epochs``: once in each
of several epochs, its clock set back); :mod:`.field` runs LoRaWAN boards for
several epochs in real time, reset at random moments (``mss demo --epochs``).
Imports ``mss_device`` and ``collect``'s broker URL parser.
"""

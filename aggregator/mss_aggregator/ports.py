"""A free TCP port on loopback, for the servers this project starts itself
(embedded broker, test and benchmark brokers and databases)."""
import socket


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

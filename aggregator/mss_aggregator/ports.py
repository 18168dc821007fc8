"""A free TCP port on loopback, for the servers this project starts itself
(embedded broker, test and benchmark brokers and databases)."""
import socket


def free_port():
    return free_ports(1)[0]


def free_ports(n):
    """``n`` distinct free ports: held open together while the kernel picks them (ports
    taken one after the other may come back equal once the first socket is closed)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()

"""Free TCP ports, for a job's MASTER_PORT or --master-port.

A port is free when it is looked at, not reserved: another program may take it before the job
binds it (ddprun --standalone picks its own the same way). A caller that cannot live with that
retries on a new port when the job says the address is in use.
"""
import socket


def free_port(host="127.0.0.1"):
    """A TCP port on `host` that nothing listens on now."""
    return free_ports(1, host)[0]


def free_ports(count, host="127.0.0.1"):
    """`count` TCP ports on `host` that nothing listens on now, all different (held together
    while they are picked)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()

"""What this host has, read without torch: the cores this process may run on and its RAM.

Every stage reads the host from here (a result's environment, the launcher's threads per rank, the
launch guard's free RAM, `ddpfsdp doctor`); what only the launch needs (GPUs, backends, a free port)
is in `launch.hardware`.
"""

from __future__ import annotations

import os


def cpu_count() -> int:
    """Cores this process may run on (respects affinity and container limits where visible)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def ram_bytes() -> tuple[int | None, int | None]:
    """(total, available) physical memory in bytes; None where the platform does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo)
        kib = lambda key: int(fields[key].split()[0]) * 1024  # noqa: E731
        return kib("MemTotal"), kib("MemAvailable")
    except (OSError, KeyError, ValueError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), None
    except (ValueError, OSError, AttributeError):
        return None, None

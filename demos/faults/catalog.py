"""Every fault of the failure lab by name, and every check name they carry. Imports no torch."""

from __future__ import annotations

from ddpfsdp.demos.faults import collectives, data, gradients, initialisation, pipeline
from ddpfsdp.demos.faults.fault import Fault

FAULTS: dict[str, Fault] = {
    fault.name: fault
    for fault in (*collectives.FAULTS, *gradients.FAULTS, *data.FAULTS, *initialisation.FAULTS,
                  *pipeline.FAULTS)
}

CLAIMS: dict[str, str] = {name: claim for fault in FAULTS.values() for name, claim in fault.claims.items()}


def get(name: str) -> Fault:
    try:
        return FAULTS[name]
    except KeyError:
        raise ValueError(f"unknown fault {name!r}; choose one of {', '.join(FAULTS)}") from None

"""The collectives of one training step as a table, per op, beside the analytic model's figures.

One table for a measured run (`report`) and a simulated one (`simulated_report`); only the title
and caption say which. Importable without torch (rich only).
"""

from __future__ import annotations

from typing import Any, Mapping

from rich.table import Table

from ddpfsdp.demos.result.schema import Comm, CommOp, DemoResult, as_result
from ddpfsdp.demos.base.units import format_iec

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send", "recv")


def comm_table(result: DemoResult | Mapping[str, Any], *, simulated: bool = False) -> Table:
    """Calls, logical bytes and wire bytes per rank of every op in the step, and theory's for each."""
    result = as_result(result)
    measured = (result.comm or Comm()).per_step
    theory = (result.theory or {}).get("comm", {})
    if simulated:
        table = Table(title="Collectives issued in one step (simulated, per rank)",
                      caption="wire: what a ring sends per rank; nothing was sent, the calls and sizes are the real "
                              "ones; theory from the analytic model")
    else:
        table = Table(title="Collectives in one training step (measured, per rank)",
                      caption="wire: what a ring sends per rank; theory from the analytic model")
    table.add_column("op", no_wrap=True)
    for column in ("calls", "logical bytes", "wire bytes per rank", "theory: wire bytes per rank", "theory: calls"):
        table.add_column(column, justify="right")
    for op in OPS:
        if op not in measured and op not in theory:
            continue
        m, t = measured.get(op) or CommOp(), theory.get(op, {})
        calls = t.get("count")
        table.add_row(
            op,
            str(m.count or 0),
            format_iec(m.bytes or 0),
            format_iec(m.wire_bytes_per_rank or 0),
            f"[dim]{format_iec(t.get('wire_bytes_per_rank')) if t else 'none expected'}[/dim]",
            f"[dim]{calls if calls is not None else 'by bucket' if t else '-'}[/dim]",
        )
    return table

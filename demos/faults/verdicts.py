"""Checks several faults share: every rank timed out, every rank raised, the ranks' collectives parted.

Each reads the raw records of both phases (errors as torch raised them, flight-recorder entries), never
a summary derived from them, so a record without the symptom fails the check whatever else it says.
"""

from __future__ import annotations

import re
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.faults import fr_table
from ddpfsdp.demos.faults.fault import Analysis, FaultBlock, Finding, PhaseBlock, RankRecord, phase_ranks

GLOO_TIMEOUT = "Timed out waiting"  # gloo/transport/tcp/unbound_buffer.cc, for a recv or a send
_BRACKETED = re.compile(r"\[[^\]]*\]\s*")  # gloo's "[file.cc:line] " before its message


def error_text(record: RankRecord) -> str:
    error = record.get("error")
    return f"{error.get('type', '')}: {error.get('message', '')}" if error else ""


def failed_ranks(phase: PhaseBlock) -> list[int]:
    return [r.get("rank") for r in phase_ranks(phase) if r.get("error")]


def _clean(phase: PhaseBlock) -> bool:
    """The phase ran on at least two ranks and none raised."""
    return len(phase_ranks(phase)) >= 2 and not failed_ranks(phase)


def every_rank_raised(name: str, block: FaultBlock, phrase: str, what: str) -> Check:
    """Every rank of the broken run raised an error containing `phrase`; no rank of the fixed run raised."""
    broken, fixed = block.get("broken") or {}, block.get("fixed") or {}
    ranks = phase_ranks(broken)
    hit = [r.get("rank") for r in ranks if phrase in error_text(r)]
    passed = len(ranks) >= 2 and len(hit) == len(ranks) and _clean(fixed)
    return Check(
        name,
        passed,
        f"broken: {len(hit)} of {len(ranks)} ranks raised {what}; fixed: "
        f"{len(failed_ranks(fixed))} of {len(phase_ranks(fixed))} ranks raised an error",
        {"broken_ranks_raising": hit, "fixed_ranks_raising": failed_ranks(fixed), "phrase": phrase},
    )


def _first_words(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters; else its whole words that fit, then "…"."""
    if len(text) <= limit:
        return text
    return text[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:") + "…"


def hung_until_timeout(name: str, block: FaultBlock) -> Check:
    """The broken run hung: a rank raised gloo's timeout, having waited the group's whole timeout, and
    every rank failed (a peer of the rank that timed out may see its connection closed first); the
    fixed run raised nothing."""
    broken, fixed = block.get("broken") or {}, block.get("fixed") or {}
    timeout_s = block.get("timeout_s")
    ranks = phase_ranks(broken)
    timed = [r.get("rank") for r in ranks if GLOO_TIMEOUT in error_text(r)]
    walls = [r.get("wall_s") for r in ranks if isinstance(r.get("wall_s"), (int, float))]
    longest = max(walls, default=0.0)
    passed = (len(ranks) >= 2 and bool(timed) and len(failed_ranks(broken)) == len(ranks)
              and isinstance(timeout_s, (int, float)) and longest >= timeout_s and _clean(fixed))
    others = {r.get("rank"): _first_words(_BRACKETED.sub("", error_text(r), count=1), 70) for r in ranks if r.get("rank") not in timed}
    return Check(
        name,
        passed,
        f"broken: ranks {timed} raised gloo's timeout ('{GLOO_TIMEOUT} ...'), the program ran {longest:.2f} s "
        f"against a {timeout_s} s timeout; the others: {others or 'none'}; fixed: "
        f"{len(failed_ranks(fixed))} of {len(phase_ranks(fixed))} ranks raised an error",
        {"timed_out_ranks": timed, "failed_ranks": failed_ranks(broken), "longest_wall_s": longest,
         "timeout_s": timeout_s, "fixed_failed_ranks": failed_ranks(fixed)},
    )


def _entries(phase: PhaseBlock) -> fr_table.EntriesByRank:
    return {r.get("rank"): list(r.get("flight_recorder") or []) for r in phase_ranks(phase)}


def ranks_part_in_flight_recorder(name: str, block: FaultBlock) -> Check:
    """The broken run's per-rank collectives differ at some sequence id; the fixed run's never do."""
    broken, fixed = _entries(block.get("broken") or {}), _entries(block.get("fixed") or {})
    found = fr_table.divergence(broken) if len(broken) >= 2 else None
    fixed_found = fr_table.divergence(fixed)
    fixed_count = len(fr_table.sequence_ids(fixed))
    passed = found is not None and len(fixed) >= 2 and fixed_found is None and fixed_count > 0
    where = (f"ranks part at sequence id {found['seq']} ({', '.join(f'rank {r} {op}' for r, op in found['ops'].items())})"
             if found else "no sequence id at which the ranks differ")
    after = (f"every rank issued the same {fixed_count} collectives" if fixed_found is None
             else f"ranks part at sequence id {fixed_found['seq']}")
    return Check(
        name,
        passed,
        f"broken: {where}; fixed: {after}",
        {"broken_divergence": found, "fixed_divergence": fixed_found, "fixed_collectives": fixed_count},
    )


# What a desync looks like to torch's analyzer (components/types.py MatchState, utils.py error_analysis).
DESYNC_VERDICTS = ("COLLECTIVE_TYPE_MISMATCH", "Not all ranks")
NOT_ANALYZED = Analysis(ran=False, error=None, log=[], errors=[])


def _desync_verdicts(analysis: Analysis) -> list[Finding]:
    return [e for e in analysis.get("errors") or []
            if e.get("missing_ranks") or any(v in str(e.get("mismatch")) for v in DESYNC_VERDICTS)]


def analyzer_flags_broken_only(name: str, block: FaultBlock) -> Check:
    """Torch's analyzer, on the broken run, reports a desync (a collective-type mismatch or a missing rank)
    at the sequence id where the ranks' entries part; on the fixed run, none."""
    broken: Analysis = (block.get("broken") or {}).get("analyzer") or NOT_ANALYZED
    fixed: Analysis = (block.get("fixed") or {}).get("analyzer") or NOT_ANALYZED
    found = fr_table.divergence(_entries(block.get("broken") or {}))
    flagged = _desync_verdicts(broken)
    first = flagged[0] if flagged else None
    passed = (bool(broken.get("ran")) and first is not None and found is not None and first.get("seq") == found["seq"]
              and bool(fixed.get("ran")) and not _desync_verdicts(fixed))
    said = f"sequence id {first['seq']}: {first['mismatch']}" if first else (broken.get("error") or "no desync")
    other = len(fixed.get("errors") or []) - len(_desync_verdicts(fixed))
    return Check(
        name,
        passed,
        f"torch's analyzer on the broken run: {said}; on the fixed run: {len(_desync_verdicts(fixed))} desyncs"
        + (f" (and {other} other findings)" if other else "") + ("" if fixed.get("ran") else f" (did not run: {fixed.get('error')})"),
        {"broken_errors": broken.get("errors") or [], "fixed_errors": fixed.get("errors") or [],
         "divergence_seq": found["seq"] if found else None},
    )

"""Every evidence check the question bank links to holds in a real run.

Each distinct demo configuration the bank links is launched once (2 CPU processes on gloo; 2 x N for a
2-D run's --tp N), as the session's shared launch of that configuration (tests/demo_runs.py), and every
check that any question
cites for it must be present in the result and pass. A claim the quiz backs with a measurement is only
as good as this test. The failure lab's links (`fault NAME`) are left to tests/test_faults.py, which runs
every fault once per session and requires every check.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from demo_runs import TIMED_CHECKS

from ddpfsdp.demos import registry
from ddpfsdp.demos.launch import request
from ddpfsdp.quiz.loader import load_bank


def _linked_configurations() -> dict[tuple[str, tuple[str, ...]], dict[str, list[str]]]:
    """(demo, args) -> {check name: [ids of the questions that cite it]}."""
    configurations: dict[tuple[str, tuple[str, ...]], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for question in load_bank().questions.values():
        if question.demo is None or question.demo.name == "fault":
            continue
        key = (question.demo.name, tuple(question.demo.args))
        for check in question.evidence:
            configurations[key][check].append(question.id)
    return configurations


CONFIGURATIONS = _linked_configurations()


@pytest.mark.dist
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "demo,args",
    sorted(CONFIGURATIONS),
    ids=[" ".join([name, *args]) for name, args in sorted(CONFIGURATIONS)],
)
def test_linked_evidence_checks_pass(demo_run, demo, args):
    # As many processes as the app would give the link on CPU (a 2-D run needs two groups of --tp).
    run = demo_run(demo, *args, procs=request.cpu_procs(request.from_args(registry.get(demo), args)))
    assert run.error is None, f"{demo} {' '.join(args)} failed: {run.error}"
    assert run.result is not None, f"{demo} {' '.join(args)} returned no result (exit {run.returncode})"
    checks = {check["name"]: check for check in run.result["checks"]}
    failures = []
    for name, question_ids in sorted(CONFIGURATIONS[(demo, args)].items()):
        check = checks.get(name)
        if check is None:
            failures.append(f"{name}: missing from the result (cited by {', '.join(question_ids)})")
        elif name in TIMED_CHECKS:
            assert check["values"], check
        elif not check["passed"]:
            failures.append(f"{name}: {check['detail']} (cited by {', '.join(question_ids)})")
    assert not failures, "\n".join(failures)

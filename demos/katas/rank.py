"""One kata on this rank: load the learner's file, run it on generated inputs beside torch's own answer,
and let rank 0 judge every rank's run.

    ddpfsdp kata check ring-allreduce --procs 4        # the launcher starts the ranks; each runs `run`

Every rank prepares every case first (its inputs, and torch's answer, which may take a collective), so
no learner code runs before the judge's own collectives are done. Then it runs the learner's function on
each case inside the counting mode (`comm.CountingMode`) and writes its outcome to the board. Rank 0 runs
the referee on a thread of its own from the start: it reads the outcomes as they land, and when they are
all in, or one rank failed, or one stopped answering (a deadlock, an endless loop), it builds the result.

A run that ended cleanly (every rank finished, nothing left in flight) returns the result to the worker
as any demo does, and the ranks leave together. Any other run cannot leave together: a rank may be blocked
in a receive or spinning in the learner's loop. Rank 0 then writes the result event itself, tells the
others (the board's verdict) and exits with ABORT_EXIT; the others exit on the verdict, and the agent
stops any rank still running, so nothing outlives the run.
"""

from __future__ import annotations

import datetime
import importlib.util
import io
import os
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import click

from ddpfsdp.demos.base.placement import Placement
from ddpfsdp.demos.katas import catalog
from ddpfsdp.demos.katas.board import Board, Outcome
from ddpfsdp.demos.katas.referee import Health, collect, health
from ddpfsdp.demos.result.schema import DemoResult, JsonObject

DEFAULT_DEADLINE_S = 3.0
RUN_LIMIT_S = 60.0  # a rank that keeps making progress is stopped here all the same
ABORT_EXIT = 3  # a rank's exit status after a run that could not end cleanly (the result is out already)
OUTPUT_CHARS = 2000  # what a rank's code printed, kept per rank

OPTIONS = [
    click.Option(["--kata"], required=True, help="The kata to judge (ddpfsdp kata list)."),
    click.Option(["--file"], required=True, help="The learner's Python file."),
    click.Option(["--deadline-s"], type=click.FloatRange(0.5, 60), default=DEFAULT_DEADLINE_S, show_default=True,
                 help="How long any wait on a peer may take before the run is reported as a deadlock."),
    click.Option(["--seed"], type=int, default=0, show_default=True, help="Seed of the generated inputs."),
]


def run(ctx: Any, *, kata: str, file: str, deadline_s: float, seed: int) -> DemoResult | None:
    """The registry's entry: judge `kata` on this rank; the result on rank 0 of a clean run (see above)."""
    return judge_on_rank(ctx, kata, Path(file), deadline_s, seed, run_key="run", publish=_publish, leave=_leave)


def _publish(ctx: Any, result: DemoResult) -> None:
    """Rank 0 writes the result event of a run that cannot end cleanly, before the others hear of it (the
    worker, which writes a clean run's, is not reached: this rank leaves at once)."""
    ctx.emit("result", result=result.to_json())


def _leave(ctx: Any) -> None:
    """End this rank after a run that cannot end cleanly, without waiting on a peer or a lock."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(ABORT_EXIT)


class LearnerOutput(io.TextIOBase):
    """sys.stdout while the learner's code runs: the main thread's writes are kept for the result, any other
    thread's (rank 0's referee writing the result event) go to the real stdout."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.kept = io.StringIO()
        self.main = threading.main_thread().ident

    def write(self, text: str) -> int:
        if threading.get_ident() == self.main:
            if self.kept.tell() < OUTPUT_CHARS:
                self.kept.write(text)
            return len(text)
        return self.real.write(text)

    def flush(self) -> None:
        self.real.flush()


def load_learner(path: Path, defines: str) -> Any:
    """The learner's function (or class), from their file loaded as a module of its own."""
    name = f"ddpfsdp_kata_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be loaded as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    spec.loader.exec_module(module)
    try:
        return getattr(module, defines)
    except AttributeError:
        raise AttributeError(f"{path.name} does not define {defines}") from None


def learner_traceback(error: BaseException, path: Path) -> tuple[str, str]:
    """The traceback a learner needs: their file's frames first, torch's and ours summed up in a line; and
    where in their file it happened ("ring_all_reduce.py, line 14"), or "" when no frame is theirs."""
    frames = traceback.extract_tb(error.__traceback__)
    mine = [frame for frame in frames if _same_file(frame.filename, path)]
    lines = ["Traceback (your code):"]
    for frame in mine:
        lines.append(f'  File "{path.name}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line}")
    if mine:
        last_mine = max(i for i, frame in enumerate(frames) if _same_file(frame.filename, path))
        below = frames[last_mine + 1:]
        if below:
            deepest = below[-1]
            lines.append(f"  ... then {len(below)} frame{'s' if len(below) != 1 else ''} below your code, the last in "
                         f"{_short(deepest.filename)}, line {deepest.lineno}, in {deepest.name}")
    else:
        lines.append("  (raised before your code ran, or where the checker called it)")
    lines.append("".join(traceback.format_exception_only(type(error), error)).rstrip())
    where = f"{path.name}, line {mine[-1].lineno}" if mine else ""
    return "\n".join(lines), where


def _same_file(filename: str, path: Path) -> bool:
    try:
        return Path(filename).resolve() == path.resolve()
    except OSError:
        return False


def _short(filename: str) -> str:
    parts = Path(filename).parts
    for root in ("torch", "ddpfsdp"):
        if root in parts:
            return "/".join(parts[parts.index(root):])
    return Path(filename).name


def run_learner(kata: catalog.Kata, judge: Any, path: Path, board: Board, deadline_s: float, seed: int,
                device: Any) -> Outcome:
    """This rank's outcome: the learner's code over its cases, or how it stopped."""
    import torch.distributed as dist

    from ddpfsdp.demos.katas.comm import Comm, CountingMode, KataDeadline, KataForbidden, gave_up

    rank, world_size = dist.get_rank(), dist.get_world_size()
    started = time.perf_counter()
    board.state("importing")
    output = LearnerOutput(sys.stdout)

    def outcome(status: str, **fields: Any) -> Outcome:
        return {"status": status, "elapsed_s": time.perf_counter() - started,
                "output": output.kept.getvalue()[:OUTPUT_CHARS], **fields}

    previous_stdout = sys.stdout
    sys.stdout = output
    try:
        try:
            learner = load_learner(path, kata.defines)
        except (KeyboardInterrupt, GeneratorExit):
            raise
        except BaseException as error:  # noqa: BLE001 - the learner's file failed to load: their error
            shown, where = learner_traceback(error, path)
            return outcome("raised", error={"type": type(error).__name__, "message": str(error), "traceback": shown,
                                            "where": where or f"importing {path.name}"})
        board.state("preparing")
        cases = judge.cases(world_size, seed)
        mine = list(enumerate(cases)) if kata.uses_comm else [(i, c) for i, c in enumerate(cases) if i % world_size == rank]
        prepared = [(index, case, judge.prepare(case, rank, world_size, device)) for index, case in mine]
        _short_timeout(deadline_s)
        comm = Comm(kata, board, deadline_s)
        mode = CountingMode(comm)
        measured = []
        for index, case, ready in prepared:
            board.state("running", case=index, case_label=case.label)
            ledger = comm.begin_case(index, case.label)
            try:
                with mode:
                    judge.call(ready, learner, comm)
            except KataForbidden as refused:
                _, where = learner_traceback(refused, path)
                return outcome("forbidden", op=refused.op, message=refused.message, where=where)
            except KataDeadline as late:
                return outcome("deadline", wait=late.wait)
            except (KeyboardInterrupt, GeneratorExit):
                raise
            except BaseException as error:  # noqa: BLE001 - the learner's code raised: their error, shown as theirs
                if gave_up(error) and ledger.direct_calls:
                    last = board.last_wait or {"rank": rank, "op": "a direct torch.distributed call", "direct": True}
                    return outcome("deadline", wait=last)
                shown, where = learner_traceback(error, path)
                return outcome("raised", error={"type": type(error).__name__, "message": str(error)[:500],
                                                "traceback": shown, "where": where, "case": case.label})
            try:
                measured.append([index, judge.measure(ready, ledger)])
            except Exception as error:  # noqa: BLE001 - what the code left cannot be read (a wrong type, a shape)
                return outcome("raised", error={
                    "type": type(error).__name__, "message": f"the checker could not read what your code left: {error}"[:500],
                    "traceback": "".join(traceback.format_exception_only(type(error), error)), "where": "",
                    "case": case.label})
        return outcome("finished", measured=measured, pending=comm.pending())
    finally:
        sys.stdout = previous_stdout
        output.flush()


def _short_timeout(deadline_s: float) -> None:
    """Hold the process group's own waits to the deadline too, so a direct blocking torch.distributed.recv in
    the learner's code times out as comm's waits do (gloo's default is 30 minutes)."""
    import torch.distributed as dist

    try:
        dist.distributed_c10d._set_pg_timeout(datetime.timedelta(seconds=deadline_s))
    except (AttributeError, RuntimeError, ValueError):
        pass


def environment() -> JsonObject:
    import platform

    import torch

    from ddpfsdp.demos.base.host import cpu_count

    return {"torch": torch.__version__, "python": platform.python_version(),
            "device_names": [platform.processor() or platform.machine() or "cpu"], "cpu_count": cpu_count(),
            "hostname": socket.gethostname()}


def assemble(kata: catalog.Kata, judge: Any, file: Path, config: JsonObject, outcomes: dict[int, Outcome],
             verdict: Health, placement: Placement, seed: int, wall_s: float) -> DemoResult:
    """The run's result (schema ddpfsdp.demo/1, demo "kata"), made where every result is made: the health
    checks, then the kata's own, judged only when every rank finished."""
    from ddpfsdp.demos.result.build import build
    from ddpfsdp.demos.result.checks import Check

    world_size = placement.world_size

    checks = list(verdict.checks)
    if verdict.clean:
        cases = judge.cases(world_size, seed)
        measured = [[(index, numbers) for index, numbers in outcomes[rank]["measured"]] for rank in range(world_size)]
        checks += judge.checks(cases, measured, world_size)
    else:
        reason = "your code did not run to its end on every rank (above)"
        checks += [Check(name, None, f"not judged: {reason}", {}, not_judged=reason) for name in kata.checks]
    ranks = [_rank_summary(rank, outcomes.get(rank)) for rank in range(world_size)]
    passed = all(check.passed for check in checks)
    return build("kata", placement, environment(), config, checks,
                 kata={"name": kata.name, "title": kata.title, "topic": kata.topic, "passed": passed,
                       "file": str(file)},
                 failure={"lines": verdict.lines, "traceback": verdict.traceback} if verdict.lines else None,
                 ranks=ranks, wall_s=wall_s)


def _rank_summary(rank: int, outcome: Outcome | None) -> JsonObject:
    if outcome is None:
        return {"rank": rank, "status": "no outcome"}
    summary = {"rank": rank, "status": outcome.get("status"), "elapsed_s": outcome.get("elapsed_s"),
               "output": outcome.get("output", "")}
    runs = [numbers for _, numbers in outcome.get("measured", [])]
    if runs and "sends" in runs[0]:
        summary["messages_sent"] = sum(1 for numbers in runs for _ in numbers["sends"])
        summary["bytes_sent"] = sum(size for numbers in runs for _, _, size in numbers["sends"])
        counts: dict[str, int] = {}
        for numbers in runs:
            for op, *_ in numbers.get("collectives", []):
                counts[op] = counts.get(op, 0) + 1
        summary["collectives"] = counts
    return summary


def judge_on_rank(ctx: Any, kata_name: str, file: Path, deadline_s: float, seed: int, run_key: str,
                  publish: Callable[[Any, DemoResult], None], leave: Callable[[Any], None]) -> DemoResult | None:
    """Run one kata on this rank; rank 0 returns the result of a clean run, other ranks None. A run that
    cannot end cleanly has rank 0 `publish(ctx, result)`, then ends in `leave(ctx)` on every rank."""
    kata = catalog.get(kata_name)
    module, attribute = kata.judge.split(":")
    judge = getattr(importlib.import_module(module), attribute)
    board = Board.of_default_group(run_key)
    world_size = ctx.world_size
    config = {"kata": kata.name, "file": str(file), "world_size": world_size, "device": ctx.device.type,
              "backend": ctx.backend, "seed": seed, "deadline_s": deadline_s}
    started = time.perf_counter()
    decided: dict[str, DemoResult] = {}

    def referee() -> None:
        try:
            decide()
        except BaseException:
            board.post_verdict(False)  # the others leave rather than wait for a word that will not come
            raise

    def decide() -> None:
        outcomes, states = collect(board, world_size, deadline_s, RUN_LIMIT_S)
        verdict = health(outcomes, states, world_size, deadline_s, kata.p2p)
        result = assemble(kata, judge, file, config, outcomes, verdict, ctx.placement, seed,
                          time.perf_counter() - started)
        decided["result"] = result
        if verdict.clean:
            board.post_verdict(True)
            return
        publish(ctx, result)
        board.post_verdict(False)
        leave(ctx)

    thread = None
    if ctx.rank == 0:
        thread = threading.Thread(target=referee, name="kata-referee", daemon=True)
        thread.start()
    outcome = run_learner(kata, judge, file, board, deadline_s, seed, ctx.device)
    board.post_outcome(outcome)
    if thread is not None:
        thread.join()
        if "result" not in decided:
            raise RuntimeError("rank 0's referee stopped without a verdict (its error is above)")
        return decided["result"]
    clean = board.wait_verdict(RUN_LIMIT_S + 2 * deadline_s)
    if not clean:
        leave(ctx)
    return None

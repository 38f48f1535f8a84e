"""Record one pipeline step on one rank: each micro-batch's compute per stage, and every send and recv.

torch's schedules (torch/distributed/pipelining/schedules.py, torch 2.13) drive a PipelineStage
(stage.py) through its public methods, and `StepRecorder` wraps those of each stage this rank holds
for the one step it records:
  forward_one_chunk(mb)                       F: the stage's forward of micro-batch mb
  backward_one_chunk(mb, full_backward=True)  B: its whole backward; with full_backward=False (the
                                              zero-bubble schedules) only the input's gradient, "I"
  backward_weight_one_chunk(mb)               W: the weights' gradient, split off by zero bubble
  get_fwd_send_ops / get_bwd_send_ops         the activation sent on, the gradient sent back: the
  get_fwd_recv_ops / get_bwd_recv_ops         P2POps the schedule hands to isend/irecv (their tensors
                                              are what goes over the wire)
and the loss function, which the schedule calls on the last stage right after its forward.

A send or recv is stamped when the stage builds it: the schedule fires it then, or with the next
batch of ops (Schedule1F1B fuses the last warm-up send with the first backward's recv). A recv's
end is the start of the compute that needs it, since the schedule waits on a recv just before that
compute; a send's completion is not waited on until later (it is shown as posted).

Clock: `time.time_ns()`, the same on every process of a host, so ranks share one axis; on CUDA each
compute edge synchronises the device first, so a span is the kernels' time, not their launch's.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, TypedDict

from ddpfsdp.demos.result.step_record import CollectiveSpan, Span

if TYPE_CHECKING:
    from ddpfsdp.demos.measure.comm import PerOp

PHASES = {"F": "forward", "B": "backward", "I": "backward-input", "W": "backward-weight", "L": "loss"}
WRAPPED = ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk",
           "get_fwd_send_ops", "get_bwd_send_ops", "get_fwd_recv_ops", "get_bwd_recv_ops")


class Action(TypedDict):
    """One compute of the recorded step as stamped (ns): F, B, I, W or L of a stage and micro-batch."""

    kind: str
    stage: int
    mb: int
    start: int
    end: int


class StampedP2P(TypedDict):
    """One send or recv as stamped (ns); completed None: a send, or a recv no compute waited on."""

    op: str  # "send" or "recv"
    what: str  # "activation" (forward) or "gradient" (backward)
    stage: int
    mb: int
    bytes: int
    peer: int
    issued: int
    completed: int | None


class RawStep(TypedDict):
    """What one rank recorded, in ns of its clock: what crosses to rank 0."""

    start: int
    end: int
    actions: list[Action]
    p2p: list[StampedP2P]


class StageSpan(Span):
    """A compute span of the timeline, with the action, stage and micro-batch it ran."""

    kind: str
    stage: int
    mb: int


class SendRecv(CollectiveSpan):
    """A send or recv on the timeline: a collective span with what it carried, for which stage and
    micro-batch, to or from which rank."""

    what: str
    stage: int
    mb: int
    peer: int


class StageStep(TypedDict):
    """One rank's recorded step on the shared axis: seconds from the earliest rank's start."""

    rank: int
    start_s: float | None
    end_s: float | None
    spans: list[StageSpan]
    collectives: list[SendRecv]


class RankPlace(TypedDict):
    """Where a rank sits: its place in its pipeline, its replica, and how many replicas there are."""

    pp_rank: int
    dp_rank: int
    dp: int


class PlacedStep(StageStep, RankPlace):
    """A rank's recorded step as the timeline carries it: with its place and its collectives of the
    step before, counted per group ("pp", and "dp" with --dp), op by op."""

    comm: dict[str, PerOp]


def _bytes(ops: list[Any]) -> int:
    return sum(op.tensor.numel() * op.tensor.element_size() for op in ops)


class StepRecorder:
    """`with StepRecorder(stages, device) as rec: schedule.step(...)`; then `record(rec.raw(), rank, origin_ns)`.

    Each action is kept as an `Action`, each send or recv as a `StampedP2P` (ns).
    """

    def __init__(self, stages: list[Any], device: Any) -> None:
        self.stages = stages
        self.cuda = getattr(device, "type", str(device)) == "cuda"
        self.actions: list[Action] = []
        self.p2p: list[StampedP2P] = []
        self.start_ns = 0
        self.end_ns = 0

    def _now(self) -> int:
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        return time.time_ns()

    def timed(self, kind: str, stage: int, mb: int, call: Callable[[], Any]) -> Any:
        start = self._now()
        try:
            return call()
        finally:
            self.actions.append(Action(kind=kind, stage=stage, mb=mb, start=start, end=self._now()))

    def loss(self, stage: int, compute: Callable[[], Any]) -> Any:
        """The loss of the next micro-batch, timed as the last stage's compute (the schedule calls it
        once per micro-batch, in order, right after that stage's forward)."""
        mb = sum(1 for a in self.actions if a["kind"] == "L")
        return self.timed("L", stage, mb, compute)

    def _wrap(self, stage: Any) -> None:
        index = stage.stage_index
        originals = {name: getattr(stage, name) for name in WRAPPED}

        def forward(mb, *args, **kwargs):
            return self.timed("F", index, mb, lambda: originals["forward_one_chunk"](mb, *args, **kwargs))

        def backward(mb, *args, **kwargs):
            full = kwargs.get("full_backward", args[1] if len(args) > 1 else True)
            return self.timed("B" if full else "I", index, mb,
                              lambda: originals["backward_one_chunk"](mb, *args, **kwargs))

        def weight(mb, *args, **kwargs):
            return self.timed("W", index, mb, lambda: originals["backward_weight_one_chunk"](mb, *args, **kwargs))

        def ops(name: str, op: str, what: str) -> Callable[..., Any]:
            def built(mb, *args, **kwargs):
                found = originals[name](mb, *args, **kwargs)
                if found:
                    self.p2p.append(StampedP2P(op=op, what=what, stage=index, mb=mb, bytes=_bytes(found),
                                               peer=found[0].peer, issued=time.time_ns(), completed=None))
                return found
            return built

        stage.forward_one_chunk = forward
        stage.backward_one_chunk = backward
        stage.backward_weight_one_chunk = weight
        stage.get_fwd_send_ops = ops("get_fwd_send_ops", "send", "activation")
        stage.get_bwd_send_ops = ops("get_bwd_send_ops", "send", "gradient")
        stage.get_fwd_recv_ops = ops("get_fwd_recv_ops", "recv", "activation")
        stage.get_bwd_recv_ops = ops("get_bwd_recv_ops", "recv", "gradient")

    def __enter__(self) -> StepRecorder:
        for stage in self.stages:
            self._wrap(stage)
        self.start_ns = self._now()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.end_ns = self._now()
        for stage in self.stages:
            for name in WRAPPED:
                stage.__dict__.pop(name, None)  # the class's own method again
        self._close_recvs()

    def _close_recvs(self) -> None:
        """A recv ends when the compute that needs it starts (the schedule waits on it just before)."""
        starts = {}
        for action in self.actions:
            needs = "activation" if action["kind"] == "F" else "gradient" if action["kind"] in "BI" else None
            if needs:
                starts.setdefault((needs, action["stage"], action["mb"]), action["start"])
        for event in self.p2p:
            if event["op"] == "recv":
                event["completed"] = starts.get((event["what"], event["stage"], event["mb"]))

    def raw(self) -> RawStep:
        """What this rank recorded, plain (it crosses to rank 0 by gather_object): ns stamps."""
        return RawStep(start=self.start_ns, end=self.end_ns, actions=self.actions, p2p=self.p2p)


def record(raw: RawStep, rank: int, origin_ns: int) -> StageStep:
    """One rank's step in the timeline's shape: seconds from `origin_ns`, the earliest rank's start."""
    def s(ns: int | None) -> float | None:
        return None if ns is None else (ns - origin_ns) / 1e9

    ordered = sorted(raw["actions"], key=lambda a: a["start"])
    spans = [StageSpan(name=f"{a['kind']} stage {a['stage']} mb {a['mb']}", phase=PHASES[a["kind"]],
                       unit=f"stage {a['stage']} mb {a['mb']}", kind=a["kind"], stage=a["stage"], mb=a["mb"],
                       start_s=s(a["start"]), end_s=s(a["end"]), seq_start=i, seq_end=i)
             for i, a in enumerate(ordered)]
    p2p = [SendRecv(op=e["op"], what=e["what"], stage=e["stage"], mb=e["mb"], peer=e["peer"],
                    bytes=e["bytes"], group="pp", group_size=2, seq=i,
                    issued_s=(e["issued"] - origin_ns) / 1e9, completed_s=s(e["completed"]))
           for i, e in enumerate(sorted(raw["p2p"], key=lambda e: e["issued"]))]
    return StageStep(rank=rank, start_s=s(raw["start"]), end_s=s(raw["end"]), spans=spans, collectives=p2p)

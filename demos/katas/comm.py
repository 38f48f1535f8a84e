"""The object a learner's code receives, and the dispatch mode that counts every message it sends.

    comm.rank, comm.world_size
    comm.isend(tensor, dst) / comm.irecv(tensor, src) -> Request     .wait()  .is_completed()
    comm.send(tensor, dst) / comm.recv(tensor, src)                  (isend/irecv, then wait)
    comm.batch_isend_irecv([comm.P2POp(comm.isend, tensor, peer), ...]) -> [Request, ...]
    comm.all_reduce(tensor), comm.reduce_scatter_single(output, input), comm.all_gather_single(output, input),
    comm.all_to_all_single(output, input), comm.broadcast(tensor, src), comm.barrier()
                                                                    (those the kata allows)

Counting is done once, by a TorchDispatchMode over the process group's own ops (`c10d.send`,
`c10d.recv_`, `c10d.allreduce_`, ...): torch 2.13 sends `send`, `isend` and `batch_isend_irecv` alike
through `c10d.send.default`, whose arguments are the tensors, the group and the peer, so a direct
`torch.distributed.send` is counted exactly as `comm.send` is, and a direct collective the kata forbids is
refused the same way. (CommDebugMode does not see point-to-point ops, and gloo's flight recorder records
no send or recv.) The mode opts out of torch's dynamo wrapper (`_should_skip_dynamo`), which would import
torch._dynamo, a second of every rank's start, on the first op.

What `comm` adds is the deadline. Every wait writes what it waits on into the board (the process group's
store) before it blocks and clears it after, and waits with `Work.wait(timeout)`; when the deadline
passes it raises `KataDeadline` with the wait, so rank 0 can read every rank's wait and name the cycle.
A send on gloo completes only once its receiver has posted the receive (torch 2.13: "Timed out waiting
... for send operation"), so a blocking send before a receive deadlocks there as it does on NCCL.

On gloo, `batch_isend_irecv` is posted as separate isends and irecvs: the same messages, all in flight at
once, without gloo's coalesced point-to-point path.
"""

from __future__ import annotations

import datetime
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from ddpfsdp.demos.katas.board import Wait, describe_wait
from ddpfsdp.demos.katas.catalog import P2P, Kata
from ddpfsdp.demos.result.schema import JsonObject

# The process group's ops, as the dispatch mode sees them, by the name the learner calls them.
C10D_OPS = {
    "send": "send", "recv_": "recv", "recv_any_source_": "recv",
    "allreduce_": "all_reduce", "allreduce_coalesced_": "all_reduce_coalesced",
    "_allgather_base_": "all_gather_single", "allgather_": "all_gather", "allgather_coalesced_": "all_gather_coalesced",
    "allgather_into_tensor_coalesced_": "all_gather_into_tensor_coalesced",
    "_reduce_scatter_base_": "reduce_scatter_single", "reduce_scatter_": "reduce_scatter",
    "reduce_scatter_tensor_coalesced_": "reduce_scatter_tensor_coalesced",
    "alltoall_base_": "all_to_all_single", "alltoall_": "all_to_all",
    "broadcast_": "broadcast", "reduce_": "reduce", "gather_": "gather", "scatter_": "scatter",
    "barrier": "barrier", "monitored_barrier_": "barrier",
}
# torch 2.13 renamed all_gather_into_tensor and reduce_scatter_tensor (now deprecated) to the *_single names.
ALIASES = {"all_gather_into_tensor": "all_gather_single", "reduce_scatter_tensor": "reduce_scatter_single"}
REDUCE_OPS = {"sum": "SUM", "max": "MAX", "min": "MIN", "product": "PRODUCT"}


class KataForbidden(BaseException):  # noqa: N818 - a refusal, raised through the learner's `except Exception`
    """The learner's code called what the kata does not allow. A BaseException, so that an `except
    Exception` in the learner's code does not swallow the refusal."""

    def __init__(self, op: str, message: str) -> None:
        super().__init__(message)
        self.op = op
        self.message = message


class KataDeadline(BaseException):  # noqa: N818 - not the learner's error: the run's deadline passed
    """A wait passed the deadline: `wait` says on what."""

    def __init__(self, wait: Wait) -> None:
        super().__init__(describe_wait(wait))
        self.wait = wait


def allowed(kata: Kata, op: str) -> bool:
    """Whether the kata lets the learner call `op` (a comm method or a torch.distributed function)."""
    op = ALIASES.get(op, op)
    if op in P2P or op == "recv":
        return kata.p2p
    return kata.allows(op) or any(ALIASES.get(name) == op for name in kata.allowed)


def refusal(kata: Kata, op: str) -> str:
    return f"{op} is not allowed in {kata.name}: {kata.instead}" if kata.instead else f"{op} is not allowed in {kata.name}"


@dataclass
class Message:
    peer: int
    elements: int
    bytes: int
    step: int


@dataclass
class Collective:
    op: str
    input_elements: int
    output_elements: int
    bytes: int  # the input's bytes (all-gather: this rank's chunk)
    marker: Any = None  # where the judge said the code was (e.g. "forward", or a micro-batch count)


@dataclass
class Ledger:
    """What one rank's code did in one case: its messages, its collectives, and what it left pending."""

    sends: list[Message] = field(default_factory=list)
    recvs: list[Message] = field(default_factory=list)
    collectives: list[Collective] = field(default_factory=list)
    receives_done: int = 0  # the step a point-to-point program is in: messages received so far
    direct_calls: int = 0  # ops called through torch.distributed, not comm
    requests: list[Request] = field(default_factory=list)
    gathered: list[tuple[weakref.ref, int]] = field(default_factory=list)  # all-gather outputs, by weak reference
    peak_gathered_bytes: int = 0
    marker: Any = None

    def gathered_alive_bytes(self) -> int:
        """Bytes of all-gather outputs still alive (their storage; a storage resized to 0 counts 0)."""
        total = 0
        for ref, _ in self.gathered:
            tensor = ref()
            if tensor is not None:
                total += tensor.untyped_storage().nbytes()
        return total

    def summary(self) -> JsonObject:
        """The ledger as numbers (JSON), for rank 0's checks."""
        return {
            "sends": [[m.peer, m.elements, m.bytes] for m in self.sends],
            "recvs": [[m.peer, m.elements, m.bytes] for m in self.recvs],
            "collectives": [[c.op, c.input_elements, c.output_elements, c.bytes, c.marker] for c in self.collectives],
            "receives_done": self.receives_done,
            "direct_calls": self.direct_calls,
            "peak_gathered_bytes": self.peak_gathered_bytes,
        }


class Request:
    """An isend or irecv in flight: `wait()` blocks until it completes, up to the run's deadline."""

    def __init__(self, comm: Comm, work: Any, op: str, peer: int | None, call: int = 0) -> None:
        self._comm, self._work, self.op, self.peer, self._call = comm, work, op, peer, call
        self.done = False

    def wait(self, timeout: Any = None) -> bool:
        if not self.done:
            self._comm._wait(self)
        return True

    def is_completed(self) -> bool:
        if not self.done and self._work.is_completed():
            self._comm._completed(self)
        return self.done

    def __repr__(self) -> str:
        return f"<Request {self.op} {'with' if self.peer is None else 'peer'} {self.peer} {'done' if self.done else 'pending'}>"


@dataclass(frozen=True)
class P2POp:
    """One point-to-point operation of a batch: `comm.P2POp(comm.isend, tensor, peer)`."""

    op: Any
    tensor: Any
    peer: int


class Comm:
    """The operations a kata allows, on this rank, counted and held to a deadline."""

    P2POp = P2POp

    def __init__(self, kata: Kata, board: Any, deadline_s: float) -> None:
        self.kata = kata
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.size = self.world_size
        self._board = board
        self._deadline_s = deadline_s
        self._gloo = dist.get_backend() == "gloo"
        self._inside = 0  # > 0 while comm itself calls torch.distributed
        self._calls: dict[str, int] = {}
        self.ledger = Ledger()
        self.case = 0
        self.case_label = ""
        self.all_requests: list[Request] = []

    def __repr__(self) -> str:
        return f"<comm rank {self.rank} of {self.world_size} ({self.kata.name})>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        offered = sorted(op for op in (*P2P, "all_reduce", "reduce_scatter_single", "all_gather_single",
                                       "all_to_all_single", "broadcast", "barrier") if allowed(self.kata, op))
        raise AttributeError(f"comm has no {name!r}; in {self.kata.name} it offers rank, world_size, "
                             f"{', '.join(offered)}")

    # --- cases ---------------------------------------------------------------------------------------

    def begin_case(self, index: int, label: str) -> Ledger:
        self.case, self.case_label = index, label
        self.ledger = Ledger()
        self._calls = {}
        return self.ledger

    def mark(self, marker: Any) -> None:
        """Where the code is (a phase, a micro-batch count): recorded with each collective after this."""
        self.ledger.marker = marker

    # --- point to point ------------------------------------------------------------------------------

    def isend(self, tensor: Any, dst: int) -> Request:
        self._check("isend")
        self._peer(dst, "dst")
        return self._start("send", dst, lambda: dist.isend(tensor, dst))

    def irecv(self, tensor: Any, src: int) -> Request:
        self._check("irecv")
        self._peer(src, "src")
        return self._start("recv", src, lambda: dist.irecv(tensor, src))

    def send(self, tensor: Any, dst: int) -> None:
        self._check("send")
        self.isend(tensor, dst).wait()

    def recv(self, tensor: Any, src: int) -> None:
        self._check("recv")
        self.irecv(tensor, src).wait()

    def batch_isend_irecv(self, ops: list[Any]) -> list[Request]:
        self._check("batch_isend_irecv")
        plain = []
        for op in ops:
            kind = getattr(op, "op", None)
            peer = getattr(op, "peer", None)
            if kind in (self.isend, dist.isend):
                plain.append(("send", op.tensor, peer))
            elif kind in (self.irecv, dist.irecv):
                plain.append(("recv", op.tensor, peer))
            else:
                raise TypeError(f"batch_isend_irecv takes comm.P2POp(comm.isend or comm.irecv, tensor, peer), got {op!r}")
            self._peer(peer, "peer")
        if self._gloo:
            return [self._start(kind, peer, _posting(kind, tensor, peer)) for kind, tensor, peer in plain]
        self._inside += 1
        try:
            works = dist.batch_isend_irecv([dist.P2POp(dist.isend if kind == "send" else dist.irecv, tensor, peer)
                                            for kind, tensor, peer in plain])
        finally:
            self._inside -= 1
        return [self._request(work, kind, peer) for work, (kind, _, peer) in zip(works, plain)]

    # --- collectives ---------------------------------------------------------------------------------

    def all_reduce(self, tensor: Any, op: str = "sum") -> None:
        self._check("all_reduce")
        reduce_op = self._reduce_op(op)
        self._collective("all_reduce", lambda: dist.all_reduce(tensor, op=reduce_op, async_op=True))

    def reduce_scatter_single(self, output: Any, input: Any, op: str = "sum") -> None:  # noqa: A002 - torch's name
        self._check("reduce_scatter_single")
        reduce_op = self._reduce_op(op)
        function = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        self._collective("reduce_scatter_single", lambda: function(output, input, op=reduce_op, async_op=True))

    def all_gather_single(self, output: Any, input: Any) -> None:  # noqa: A002 - torch's name
        self._check("all_gather_single")
        function = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        self._collective("all_gather_single", lambda: function(output, input, async_op=True))

    def reduce_scatter_tensor(self, output: Any, input: Any, op: str = "sum") -> None:  # noqa: A002
        """torch's older name for reduce_scatter_single."""
        self.reduce_scatter_single(output, input, op)

    def all_gather_into_tensor(self, output: Any, input: Any) -> None:  # noqa: A002
        """torch's older name for all_gather_single."""
        self.all_gather_single(output, input)

    def all_to_all_single(self, output: Any, input: Any) -> None:  # noqa: A002 - torch's name
        self._check("all_to_all_single")
        self._collective("all_to_all_single", lambda: dist.all_to_all_single(output, input, async_op=True))

    def broadcast(self, tensor: Any, src: int) -> None:
        self._check("broadcast")
        self._peer(src, "src", self_allowed=True)
        self._collective("broadcast", lambda: dist.broadcast(tensor, src, async_op=True))

    def barrier(self) -> None:
        self._collective("barrier", lambda: dist.barrier(async_op=True))

    # --- the machinery -------------------------------------------------------------------------------

    def _check(self, op: str) -> None:
        if not allowed(self.kata, op):
            raise KataForbidden(op, refusal(self.kata, op))

    def _peer(self, peer: Any, what: str, self_allowed: bool = False) -> None:
        if isinstance(peer, bool) or not isinstance(peer, int) or not 0 <= peer < self.world_size:
            raise ValueError(f"{what}={peer!r}: a rank is a whole number from 0 to {self.world_size - 1}")
        if peer == self.rank and not self_allowed:
            raise ValueError(f"{what}={peer}: rank {self.rank} cannot send to or receive from itself; copy locally")

    def _reduce_op(self, op: str) -> Any:
        name = str(op).lower()
        if name == "avg":
            raise ValueError("gloo has no AVG reduction: sum, then divide by comm.world_size")
        if name not in REDUCE_OPS:
            raise ValueError(f"op={op!r}: one of {', '.join(REDUCE_OPS)}")
        return getattr(dist.ReduceOp, REDUCE_OPS[name])

    def _start(self, op: str, peer: int, post: Any) -> Request:
        self._inside += 1
        try:
            work = post()
        finally:
            self._inside -= 1
        return self._request(work, op, peer)

    def _request(self, work: Any, op: str, peer: int | None, call: int = 0) -> Request:
        request = Request(self, work, op, peer, call)
        self.ledger.requests.append(request)
        self.all_requests.append(request)
        return request

    def _collective(self, op: str, post: Any) -> None:
        call = self._calls.get(op, 0)
        self._calls[op] = call + 1
        self._inside += 1
        try:
            work = post()
        finally:
            self._inside -= 1
        if work is not None:
            self._request(work, op, None, call).wait()

    def wait_info(self, request: Request) -> Wait:
        return {"rank": self.rank, "op": request.op, "peer": request.peer, "step": self.ledger.receives_done,
                "call": request._call, "case": self.case, "case_label": self.case_label}

    def _wait(self, request: Request) -> None:
        info = self.wait_info(request)
        self._board.waiting(info)
        try:
            finished = request._work.wait(datetime.timedelta(seconds=self._deadline_s))
        except RuntimeError as error:
            if gave_up(error):
                raise KataDeadline(info) from None
            raise
        if finished is False and not request._work.is_completed():
            raise KataDeadline(info)
        self._completed(request)
        self._board.running(self.case, self.case_label)

    def _completed(self, request: Request) -> None:
        request.done = True
        if request.op == "recv":
            self.ledger.receives_done += 1

    def pending(self) -> list[Wait]:
        """Requests the code started and never waited on (nor saw complete), as waits."""
        left = []
        for request in self.all_requests:
            if not request.done:
                left.append(self.wait_info(request))
        return left


def _posting(kind: str, tensor: Any, peer: int) -> Any:
    """What posts one message of a batch: an isend or an irecv of `tensor` with `peer`."""
    function = dist.isend if kind == "send" else dist.irecv
    return lambda: function(tensor, peer)


def gave_up(error: BaseException) -> bool:
    """The error a wait ends in when the deadline passed, here or at the peer: gloo times the wait out, or
    the peer's own timeout closed the connection first ("Connection closed by peer")."""
    text = str(error)
    return isinstance(error, RuntimeError) and any(
        words in text for words in ("Timed out", "timed out", "Connection closed by peer", "Connection reset by peer"))


class CountingMode(TorchDispatchMode):
    """Counts every process-group op on this rank into the comm's ledger and refuses what the kata forbids."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # torch would otherwise wrap __torch_dispatch__ with dynamo.disable, importing torch._dynamo

    def __init__(self, comm: Comm) -> None:
        super().__init__()
        self.comm = comm

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if func.namespace == "c10d":
            return self._c10d(func, args, kwargs or {})
        return func(*args, **(kwargs or {}))

    def _c10d(self, func: Any, args: tuple, kwargs: dict) -> Any:
        comm = self.comm
        c10d_name = str(func).split(".")[1]
        op = C10D_OPS.get(c10d_name, c10d_name)
        direct = comm._inside == 0
        if direct and not allowed(comm.kata, op):
            raise KataForbidden(op, f"torch.distributed.{op} was called directly: " + refusal(comm.kata, op))
        ledger = comm.ledger
        if direct:
            ledger.direct_calls += 1
        if op in ("send", "recv"):
            tensors, peer = args[0], int(args[2])
            elements = sum(t.numel() for t in tensors)
            size = sum(t.numel() * t.element_size() for t in tensors)
            (ledger.sends if op == "send" else ledger.recvs).append(Message(peer, elements, size, ledger.receives_done))
            if direct:
                comm._board.waiting({"rank": comm.rank, "op": op, "peer": peer, "step": ledger.receives_done,
                                     "case": comm.case, "case_label": comm.case_label, "direct": True})
        elif op != "barrier":
            tensor_in, tensor_out = _in_out(c10d_name, args)
            ledger.collectives.append(Collective(op, _numel(tensor_in), _numel(tensor_out), _nbytes(tensor_in),
                                                 ledger.marker))
            if op == "all_gather_single" and isinstance(tensor_out, torch.Tensor):
                alive = ledger.gathered_alive_bytes()
                ledger.peak_gathered_bytes = max(ledger.peak_gathered_bytes, alive + _nbytes(tensor_out))
                ledger.gathered.append((weakref.ref(tensor_out), _nbytes(tensor_out)))
        return func(*args, **kwargs)


def _in_out(c10d_name: str, args: tuple) -> tuple[Any, Any]:
    """The input and output tensors of a collective op's arguments."""
    if c10d_name in ("_allgather_base_", "_reduce_scatter_base_", "alltoall_base_"):
        return args[1], args[0]
    if c10d_name in ("allgather_", "reduce_scatter_"):
        return args[1], args[0]
    return args[0], args[0]


def _flat(value: Any) -> list[Any]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _flat(item)]
    return []


def _numel(value: Any) -> int:
    return sum(t.numel() for t in _flat(value))


def _nbytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in _flat(value))


def now_s() -> float:
    return time.time()

"""The at-scale demos refuse bad input before any rank starts, with a message that says what to do, no
traceback and nothing of the user's touched; and a checkpoint-resume run's plan is its two launches (or
one, from a folder holding this demo's checkpoint). No rank is started here."""

from __future__ import annotations

import json
import os

import pytest
from conftest import run_cli

from ddpfsdp.demos.base.placement import Placement
from ddpfsdp.demos.launch import launcher
from ddpfsdp.demos.launch.launcher import DemoRun, LaunchError, Launch, placed_like
from ddpfsdp.demos.train import checkpoint_folder
from ddpfsdp.demos.train.checkpoint_folder import MANIFEST, Manifest, launches, shaping_options, write_manifest
from ddpfsdp.demos.train.spec import RunSpec


@pytest.fixture
def never_started(monkeypatch):
    """Fail the test if any launch gets as far as starting its agent."""

    def started(self):
        raise AssertionError("a launch was started: the bad input was not refused first")

    monkeypatch.setattr(DemoRun, "start", started)


def _refused(*args: str) -> str:
    outcome = run_cli("demo", *args, stdin="")
    assert outcome.exit_code == 2, (outcome.stdout, outcome.stderr)
    assert outcome.exception is None and "Traceback" not in outcome.stdout + outcome.stderr
    return " ".join((outcome.stdout + outcome.stderr).split())


@pytest.mark.parametrize("args, message", [
    (["straggler", "--delay-ms", "-5"], "'--delay-ms': -5.0 is not in the range x>=0"),
    (["straggler", "--procs", "2", "--delay-ms", "120000"], "not less than the process group's time-out of 120 s"),
    (["straggler", "--procs", "2", "--delay-ms", "5000", "--timeout-s", "4"], "time-out of 4 s (--timeout-s)"),
    (["straggler", "--procs", "2", "--slow-rank", "2"], "--slow-rank 2 is not a rank of this run: it has 2 ranks"),
    (["straggler", "--strategy", "zro"], "'--strategy': 'zro' is not one of 'ddp', 'fsdp'"),
    (["checkpoint-resume", "--resume-on", "1"], "'--resume-on': 1 is not in the range 2<=x<=128"),
    (["checkpoint-resume", "--procs", "2", "--batch-size", "3", "--resume-on", "4"],
     "the global batch is 6 samples (3 per rank on 2 ranks), which 4 ranks cannot split evenly"),
    (["checkpoint-resume", "--save-after", "0"], "'--save-after': 0 is not in the range 1<=x<=500"),
    (["local-sgd", "--period", "1"], "'--period': 1 is not in the range 2<=x<=100"),
    (["local-sgd", "--period", "0"], "'--period': 0 is not in the range 2<=x<=100"),
    (["local-sgd", "--period", "-4"], "'--period': -4 is not in the range 2<=x<=100"),
    (["local-sgd", "--period", "1000000"], "'--period': 1000000 is not in the range 2<=x<=100"),
    (["local-sgd", "--period", "nan"], "'--period': 'nan' is not a valid integer"),
    (["local-sgd", "--local-sgd-warmup", "-1"], "'--local-sgd-warmup': -1 is not in the range 0<=x<=100"),
    (["local-sgd", "--strategy", "fsdp"], "--strategy is not an option of `ddpfsdp demo local-sgd`"),
])
def test_bad_input_is_refused_before_any_launch(never_started, args, message):
    assert message in _refused(*args)


def test_local_sgd_refuses_anything_but_ddp_replicas():
    import click

    from ddpfsdp.demos.train.at_scale_options import validate_local_sgd

    with pytest.raises(click.UsageError, match="local-sgd averages DDP replicas"):
        validate_local_sgd(RunSpec.for_demo("local-sgd", {"strategy": "fsdp"}))
    validate_local_sgd(RunSpec.for_demo("local-sgd", {}), world_size=2, device="cpu")


def test_a_delay_under_a_longer_time_out_is_let_through():
    run = DemoRun("straggler", ["--delay-ms", "5000"], procs=2, timeout_s=30)
    assert run.asked.designed_wait_s() == 5.0
    with pytest.raises(LaunchError, match="time-out of 5 s"):
        DemoRun("straggler", ["--delay-ms", "5000"], procs=2, timeout_s=5)


def test_the_help_texts_tell_the_two_checkpoint_demos_apart():
    checkpoint = " ".join(run_cli("demo", "checkpoint", "--help").stdout.split())
    resume = " ".join(run_cli("demo", "checkpoint-resume", "--help").stdout.split())
    assert "Activation checkpointing" in checkpoint and "checkpoint-resume" in checkpoint
    assert "torch.distributed.checkpoint" in resume and "activation checkpointing" in resume


# --- the checkpoint's folder ---------------------------------------------------------------------------------


def test_a_folder_of_another_job_is_refused_and_left_as_it_was(never_started, tmp_path):
    folder = tmp_path / "job7"
    folder.mkdir()
    (folder / "__0_0.distcp").write_bytes(b"not ours")
    (folder / ".metadata").write_bytes(b"nor this")
    message = _refused("checkpoint-resume", "--procs", "2", "--dir", str(folder))
    assert ".metadata, __0_0.distcp, and no checkpoint this demo saved" in message and "nothing was written" in message
    assert sorted(p.name for p in folder.iterdir()) == [".metadata", "__0_0.distcp"]
    assert (folder / "__0_0.distcp").read_bytes() == b"not ours"


@pytest.mark.parametrize("where, message", [
    ("file", "Invalid value for '--dir': Directory"),
    ("no-parent/ckpt", "does not exist; create it"),
    ("bad-manifest", "is not a manifest this demo wrote"),
])
def test_a_folder_that_cannot_be_used_is_named(never_started, tmp_path, where, message):
    (tmp_path / "file").write_text("x")
    (tmp_path / "bad-manifest").mkdir()
    (tmp_path / "bad-manifest" / MANIFEST).write_text("{not json")
    assert message in _refused("checkpoint-resume", "--procs", "2", "--dir", str(tmp_path / where))


def test_a_folder_that_cannot_be_written_is_named(never_started, tmp_path, monkeypatch):
    # the check's own answer (a root user may write anywhere, so it is given here)
    monkeypatch.setattr(checkpoint_folder, "writable", lambda folder: False)
    assert "cannot be made" in _refused("checkpoint-resume", "--procs", "2", "--dir", str(tmp_path / "new"))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "is not writable" in _refused("checkpoint-resume", "--procs", "2", "--dir", str(empty))


def _saved(folder, **changed) -> Manifest:
    """A manifest as the saving launch writes it: the run's options resolved on CPU, on 2 ranks."""
    spec = RunSpec.for_demo("checkpoint-resume", {}).resolved("cpu")
    options = {**shaping_options(spec), **changed}
    folder.mkdir(exist_ok=True)
    manifest = Manifest(options=options, world_size=2, global_batch=8, saved={"saved_world": 2})
    write_manifest(folder, manifest)
    return manifest


def test_a_resume_with_other_options_than_the_checkpoint_s_is_refused_naming_each(never_started, tmp_path):
    _saved(tmp_path / "ckpt", save_after=3, strategy="ddp")
    message = _refused("checkpoint-resume", "--procs", "2", "--dir", str(tmp_path / "ckpt"), "--batch-size", "2")
    assert "holds a checkpoint saved with other options" in message
    for differs in ("--save-after saved 3, asked 2", "--strategy saved ddp, asked fsdp",
                    "the global batch: saved 8 (4 per rank on 2), asked 4 (--batch-size 2)"):
        assert differs in message
    assert json.loads((tmp_path / "ckpt" / MANIFEST).read_text())["options"]["save_after"] == 3


def test_a_resume_from_this_demo_s_checkpoint_is_one_launch_on_resume_on_ranks(tmp_path):
    _saved(tmp_path / "ckpt")
    run = DemoRun("checkpoint-resume", ["--dir", str(tmp_path / "ckpt"), "--resume-on", "4"], procs=2)
    [only] = run.launches
    assert only.placement == Placement("cpu", 4)
    assert (only.asked.phase, only.asked.batch_size, only.asked.checkpoint_folder) == ("resume", 2, str(tmp_path / "ckpt"))
    # a world that cannot split the saved global batch of 8
    with pytest.raises(LaunchError, match="which 3 ranks cannot split evenly"):
        DemoRun("checkpoint-resume", ["--dir", str(tmp_path / "ckpt"), "--resume-on", "3"], procs=2)


def test_a_run_is_a_save_then_a_resume_in_a_folder_it_makes_later():
    spec = RunSpec.for_demo("checkpoint-resume", {"model": "tiny"}).resolved("cpu")
    (save, on), (resume, resumed_on) = launches(spec, 4, "/tmp/ddpfsdp-scratch")
    assert (save.phase, on, save.batch_size, save.checkpoint_folder) == ("save", None, 4, "/tmp/ddpfsdp-scratch")
    # half the saving ranks, each reading twice the samples: the same global batch of 16
    assert (resume.phase, resumed_on, resume.batch_size, resume.resume_on) == ("resume", 2, 8, 2)
    assert [world for _, world in launches(spec, 2, "/x")] == [None, 4]  # twice as many under 4
    run = DemoRun("checkpoint-resume", ["--model", "tiny"], procs=2)
    assert [launch.placement for launch in run.launches] == [Placement("cpu", 2), Placement("cpu", 4)]
    assert not os.path.exists(run.scratch)  # made by the saving ranks, once the run starts


def test_a_later_launch_goes_where_the_first_went():
    assert placed_like(Placement("cpu", 4), 2) == Placement("cpu", 2)
    assert placed_like(Placement("cuda", 2, ranks_per_gpu=2), 4) == Placement("cuda", 4, ranks_per_gpu=4)


# --- a run of several launches -------------------------------------------------------------------------------


def _stand_in(outcomes: list[int]):
    """A launch that ends with each exit status in turn, reporting a result when it is 0."""
    from ddpfsdp.demos.result.schema import DemoResult

    def launch_events(self):
        code = outcomes.pop(0)
        self.started.append(self._launch.asked.phase)
        os.makedirs(self.scratch, exist_ok=True)
        if code == 0:
            self.results.append(DemoResult(demo=self.demo))
            yield {"event": "result"}
        else:
            self.error = {"event": "error", "message": "rank 0 failed"}
            yield self.error
        self.returncode = code

    return launch_events


@pytest.mark.parametrize("outcomes, phases", [([0, 0], ["save", "resume"]), ([1, 0], ["save"])])
def test_each_launch_starts_once_the_one_before_ended_well_and_the_scratch_folder_goes(monkeypatch, outcomes, phases):
    monkeypatch.setattr(DemoRun, "_launch_events", _stand_in(list(outcomes)))
    run = DemoRun("checkpoint-resume", ["--model", "tiny"], procs=2)
    run.started = []
    events = list(run.events())
    assert run.started == phases and len(events) == len(phases)
    assert (run.returncode == 0) == (outcomes == [0, 0])
    assert not os.path.exists(run.scratch)


def test_a_cancel_between_launches_starts_no_other(monkeypatch):
    monkeypatch.setattr(DemoRun, "_launch_events", _stand_in([0, 0]))
    run = DemoRun("checkpoint-resume", ["--model", "tiny"], procs=2)
    run.started = []
    for _ in run.events():
        run.cancelled = True
    assert run.started == ["save"]
    assert isinstance(run.launches[1], Launch) and launcher.DemoRun is DemoRun

"""The folder a checkpoint-resume run saves to and resumes from, its manifest, and the run's two launches.

    launches(spec, world_size=4, scratch="/tmp/ddpfsdp-...")   # [(save on 4), (resume on 2)]

A folder is one of: missing or empty (the run saves there, then resumes from it), holding a checkpoint this
demo saved (the run resumes from it on --resume-on ranks, without saving again), or anything else (refused:
it may be another job's, and nothing of it is touched). The saving launch writes the manifest last, so a
folder with a manifest holds a whole checkpoint: the options it was saved with, its world and global batch,
and what the save measured, which the resuming launch needs for its checks (the losses of the run that went
on without stopping among them). A resume whose options differ from the manifest's in anything that shapes
the state (the model, the optimizer, the learning rate, the seed, the batch) is refused, naming each.

Torch-free: the CLI checks a folder before any rank starts.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from ddpfsdp.demos.result.schema import JsonObject
from ddpfsdp.demos.train.spec import RESUME, RunSpec, option_fields

MANIFEST = "ddpfsdp-checkpoint.json"
FORMAT = "ddpfsdp.checkpoint/1"
DEMO = RESUME[0]
# Options that say where and how the resume happens, which may differ from the save's; the batch per rank
# follows from the world (what must match is the global batch, compared on its own).
WHERE = ("resume_on", "dir", "batch_size")
SHOWN_NAMES = 4  # names of another job's files a refusal quotes
OptionValue = str | int | float | bool | None


@dataclass
class Manifest:
    """What the saving launch wrote beside the checkpoint."""

    options: dict[str, OptionValue]  # every option of the demo but WHERE, as the saving run resolved them
    world_size: int
    global_batch: int
    saved: JsonObject = field(default_factory=dict)  # the save's figures (schema.CheckpointResume's JSON)
    torch: str | None = None
    format: str = FORMAT
    demo: str = DEMO

    def to_json(self) -> JsonObject:
        return {"format": self.format, "demo": self.demo, "torch": self.torch, "world_size": self.world_size,
                "global_batch": self.global_batch, "options": self.options, "saved": self.saved}


def writable(folder: Path) -> bool:
    """Whether this process may make and delete entries in `folder`."""
    return os.access(folder, os.W_OK | os.X_OK)


class FolderError(ValueError):
    """A folder the run cannot use as asked; the message says why and what to do."""


def shaping_options(spec: RunSpec) -> dict[str, OptionValue]:
    """The options of a resolved run that shape what it saves and trains (all the demo's but WHERE)."""
    return {item.name: getattr(spec, item.name) for item in option_fields(DEMO) if item.name not in WHERE}


def read_manifest(folder: str | os.PathLike) -> Manifest | None:
    """The manifest in `folder`, or None where there is none; FolderError for one that cannot be read."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT or data.get("demo") != DEMO:
            raise ValueError(f"format {data.get('format')!r} of demo {data.get('demo')!r}")
        return Manifest(options=dict(data["options"]), world_size=int(data["world_size"]),
                        global_batch=int(data["global_batch"]), saved=dict(data.get("saved") or {}),
                        torch=data.get("torch"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FolderError(f"{path} is not a manifest this demo wrote ({exc}); leave the folder as it is and "
                          "give an empty or new one with --dir") from None


def write_manifest(folder: str | os.PathLike, manifest: Manifest) -> Path:
    """Write the manifest whole or not at all (a rename), so a folder never holds half of one."""
    path = Path(folder) / MANIFEST
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(manifest.to_json(), indent=1), encoding="utf-8")
    os.replace(partial, path)
    return path


def check_folder(folder: str) -> Manifest | None:
    """What the folder given with --dir holds, for this run: the manifest of a checkpoint to resume from, or
    None for a folder to save in (missing, or empty). FolderError, saying what to do, for one that cannot be
    written, a file, or one holding anything else (it may be another job's: nothing of it is touched)."""
    path = Path(folder).expanduser()
    if path.exists() and not path.is_dir():
        raise FolderError(f"--dir {folder} is a file, not a folder; give a new or empty folder")
    if not path.exists():
        parent = path.absolute().parent
        if not parent.is_dir():
            raise FolderError(f"--dir {folder}: its parent {parent} does not exist; create it, or give another "
                              "folder")
        if not writable(parent):
            raise FolderError(f"--dir {folder} cannot be made: {parent} is not writable; give a folder you can "
                              "write to")
        return None
    manifest = read_manifest(path)
    if manifest is not None:
        return manifest
    names = sorted(entry.name for entry in path.iterdir())
    if names:
        shown = ", ".join(names[:SHOWN_NAMES]) + (f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES
                                                   else "")
        raise FolderError(f"--dir {folder} holds {shown}, and no checkpoint this demo saved (no {MANIFEST}): it may "
                          "be another job's, so nothing was written; give an empty or new folder")
    if not writable(path):
        raise FolderError(f"--dir {folder} is not writable; give a folder you can write to")
    return None


def differences(manifest: Manifest, spec: RunSpec, global_batch: int) -> list[str]:
    """Each option of `spec` (resolved) that differs from the saved run's, as `--name saved X, asked Y`, and
    the global batch (`global_batch` is the run's: its batch per rank times its saving world)."""
    asked = shaping_options(spec)
    out = [] if global_batch == manifest.global_batch else [
        f"the global batch: saved {manifest.global_batch} ({manifest.global_batch // manifest.world_size} per rank "
        f"on {manifest.world_size}), asked {global_batch} (--batch-size {spec.batch_size})"]
    for name in sorted(set(asked) | set(manifest.options)):
        saved, now = manifest.options.get(name), asked.get(name)
        if saved != now:
            out.append(f"--{name.replace('_', '-')} saved {saved}, asked {now}")
    return out


def default_resume_world(saved_world: int) -> int:
    """Half the saving ranks where they are 4 or more, else twice as many: always another world."""
    return saved_world // 2 if saved_world >= 4 else saved_world * 2


def resume_world(spec: RunSpec, saved_world: int) -> int:
    return spec.resume_on or default_resume_world(saved_world)


def check_global_batch(global_batch: int, saved_world: int, resumed_world: int, batch_size: int) -> None:
    """The resumed ranks split the saved run's global batch evenly, so each step trains on the same samples."""
    if global_batch % resumed_world:
        fits = [m for m in range(2, 2 * global_batch + 1) if global_batch % m == 0 and m != saved_world][:4]
        raise FolderError(
            f"the global batch is {global_batch} samples ({batch_size} per rank on {saved_world} ranks), which "
            f"{resumed_world} ranks cannot split evenly, so the resumed steps would not train on the saved run's "
            f"samples; give --resume-on {' or '.join(str(m) for m in fits) or 'a divisor of it'}, or a --batch-size "
            f"that makes the global batch (--batch-size x {saved_world}) a multiple of {resumed_world}")


def launches(spec: RunSpec, world_size: int, scratch: str) -> list[tuple[RunSpec, int | None]]:
    """The run's launches (the registry's `launches` hook): save on the ranks asked then resume on
    --resume-on; or, from a folder that holds this demo's checkpoint, resume only. Each resumed rank reads
    the global batch's share that makes the same steps: global batch / resumed world."""
    folder = spec.dir or scratch
    manifest = read_manifest(folder) if spec.dir else None
    plan: list[tuple[RunSpec, int | None]] = []
    if manifest is None:
        saved_world, global_batch = world_size, spec.batch_size * world_size
        plan.append((replace(spec, phase="save", checkpoint_folder=folder), None))
    else:
        saved_world, global_batch = manifest.world_size, manifest.global_batch
    resumed = resume_world(spec, saved_world)
    plan.append((replace(spec, phase="resume", checkpoint_folder=folder, batch_size=global_batch // resumed,
                         resume_on=resumed), resumed))
    return plan

"""The question bank: quiz/bank/<topic>.toml files and answers/<id>.md model answers, validated.

Everything a question can get wrong is caught here, at load time, with a message that names the file,
the question id and the field, so a mistake in the bank never surfaces as a crash in the middle of a
quiz. Numeric answers are computed here with the analytic model's quiz functions (pure Python), so a
question never carries a typed-in number.

This module is imported by the CLI and the plain mode: it must not import torch or textual.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KINDS = ("single", "multi", "numeric", "order", "explain")
LEVELS = {1: "fundamentals", 2: "working knowledge", 3: "in depth", 4: "staff-level trade-offs"}

# unit name -> how many base units (bytes, or 1 for counts and ratios) one of it is.
UNITS: dict[str, float] = {
    "bytes": 1,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
    "": 1,
    "x": 1,
}
BYTE_UNITS = frozenset(UNITS) - {"", "x"}

DEFAULT_TOLERANCE = 0.05

_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_FILE_FIELDS = {"topic", "title", "order", "description", "question"}
_COMMON_FIELDS = {"id", "level", "kind", "prompt", "tags", "demo", "evidence", "kata"}
_KIND_FIELDS = {
    "single": {"choices", "answer", "why"},
    "multi": {"choices", "answer", "why"},
    "numeric": {"calc", "unit", "tolerance", "measure"},
    "order": {"steps", "why", "any_order"},
    "explain": {"talking_points"},
}
# How to run a demo is the app's decision (and the machine's), never the bank's.
_LAUNCH_ARGS = ("--procs", "--gpus", "--json", "--force")


class BankError(Exception):
    """A problem in the question bank, naming the file, question id and field."""

    def __init__(self, file: Path | str, message: str, *, question: str | None = None, field: str | None = None):
        self.file = str(file)
        self.question = question
        self.field = field
        where = self.file
        if question:
            where += f", question {question!r}"
        if field:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class DemoLink:
    name: str
    args: tuple[str, ...] = ()

    def command(self) -> str:
        return " ".join(["ddpfsdp", "demo", self.name, *self.args])


@dataclass(frozen=True)
class Calc:
    fn: str
    args: Mapping[str, Any]


@dataclass(frozen=True)
class Question:
    id: str
    topic: str
    level: int
    kind: str
    prompt: str
    file: Path
    answer_file: Path
    tags: tuple[str, ...] = ()
    demo: DemoLink | None = None
    evidence: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    # single: the correct choice's text; multi: the correct choices' texts (never positions).
    answer: str | tuple[str, ...] | None = None
    # single and multi: one line per choice, in the order of `choices`, saying why it is right or wrong;
    # order: one line per step, in the order of `steps`, saying why the step sits where it does.
    why: tuple[str, ...] = ()
    calc: Calc | None = None
    value: float | None = None  # numeric: the analytic model's answer, in base units
    unit: str = ""
    tolerance: float = DEFAULT_TOLERANCE
    measure: str | None = None
    steps: tuple[str, ...] = ()
    # order: groups of consecutive steps independent of each other, which may come in any order (texts)
    any_order: tuple[tuple[str, ...], ...] = ()
    talking_points: tuple[str, ...] = ()
    kata: str | None = None  # the kata that writes the mechanism this question asks about (`ddpfsdp kata`)

    @property
    def spot_the_flaw(self) -> bool:
        return "spot-the-flaw" in self.tags

    def model_answer(self) -> str:
        """The Markdown model answer; raises OSError when the file has gone since the bank loaded."""
        return self.answer_file.read_text(encoding="utf-8")


@dataclass(frozen=True)
class Topic:
    id: str
    title: str
    order: int
    description: str
    file: Path
    question_ids: tuple[str, ...]


@dataclass(frozen=True)
class Bank:
    topics: dict[str, Topic]  # in home-screen order
    questions: dict[str, Question]  # in bank order

    def in_topic(self, topic: str) -> list[Question]:
        return [self.questions[qid] for qid in self.topics[topic].question_ids]


def default_bank_dir() -> Path:
    return Path(__file__).resolve().parent / "bank"


def default_answers_dir() -> Path:
    import ddpfsdp.answers

    return Path(ddpfsdp.answers.__file__).resolve().parent


def quiz_functions() -> dict[str, Callable[..., float]]:
    from ddpfsdp.demos.theory.quiz_answers import QUIZ_FUNCTIONS

    return QUIZ_FUNCTIONS


def load_bank(
    bank_dir: Path | str | None = None,
    answers_dir: Path | str | None = None,
    *,
    functions: Mapping[str, Callable[..., float]] | None = None,
    demos: Mapping[str, Any] | None = None,
) -> Bank:
    """Load and validate every topic file in `bank_dir`; raise BankError on the first problem.

    `functions` (the analytic model's QUIZ_FUNCTIONS) and `demos` (the demo registry) default to the
    real ones; they are parameters so a bank can be checked against others.
    """
    bank_dir = Path(bank_dir) if bank_dir is not None else default_bank_dir()
    answers_dir = Path(answers_dir) if answers_dir is not None else default_answers_dir()
    if demos is None:
        from ddpfsdp.demos.registry import DEMOS as demos
    files = sorted(bank_dir.glob("*.toml"))
    if not files:
        raise BankError(bank_dir, "no topic files (*.toml) found; the question bank is missing")

    topics: list[Topic] = []
    questions: dict[str, Question] = {}
    lazy_functions = _LazyFunctions(functions)
    for path in files:
        topic, topic_questions = _load_file(path, answers_dir, demos, lazy_functions)
        for question in topic_questions:
            if question.id in questions:
                other = questions[question.id].file.name
                raise BankError(path, f"duplicate id; it is already used in {other}", question=question.id, field="id")
            questions[question.id] = question
        topics.append(topic)
    seen_orders: dict[int, str] = {}
    for topic in topics:
        if topic.order in seen_orders:
            raise BankError(topic.file, f"order {topic.order} is also used by topic {seen_orders[topic.order]!r}", field="order")
        seen_orders[topic.order] = topic.id
    topics.sort(key=lambda t: t.order)
    return Bank(topics={t.id: t for t in topics}, questions=questions)


class _LazyFunctions:
    """Imports the analytic model only when the bank has a numeric question."""

    def __init__(self, functions: Mapping[str, Callable[..., float]] | None):
        self._functions = functions

    def get(self) -> Mapping[str, Callable[..., float]]:
        if self._functions is None:
            self._functions = quiz_functions()
        return self._functions


def _load_file(path: Path, answers_dir: Path, demos: Mapping[str, Any], functions: _LazyFunctions) -> tuple[Topic, list[Question]]:
    # Imported here: the app starts from the cached bank and never parses TOML.
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise BankError(path, f"not valid TOML: {error}") from None
    except OSError as error:
        raise BankError(path, f"cannot be read: {error.strerror}") from None

    unknown = set(data) - _FILE_FIELDS
    if unknown:
        raise BankError(path, f"unknown field(s) {', '.join(sorted(unknown))}; a topic file has {', '.join(sorted(_FILE_FIELDS))}", field=sorted(unknown)[0])
    topic_id = _require(data, "topic", str, path)
    if not _ID.match(topic_id):
        raise BankError(path, f"topic {topic_id!r} must be lowercase words joined by hyphens", field="topic")
    if path.stem != topic_id:
        raise BankError(path, f"topic is {topic_id!r} but the file is named {path.name}; name it {topic_id}.toml", field="topic")
    title = _require(data, "title", str, path)
    order = _require(data, "order", int, path)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise BankError(path, "must be a string", field="description")
    raw_questions = data.get("question", [])
    if not isinstance(raw_questions, list) or not raw_questions:
        raise BankError(path, "a topic needs at least one [[question]]", field="question")

    questions = [_load_question(path, topic_id, raw, answers_dir, demos, functions, index) for index, raw in enumerate(raw_questions)]
    topic = Topic(topic_id, title, order, description, path, tuple(q.id for q in questions))
    return topic, questions


def _require(data: Mapping[str, Any], name: str, kind: type, path: Path, question: str | None = None) -> Any:
    if name not in data:
        raise BankError(path, "is missing", question=question, field=name)
    value = data[name]
    # bool is an int in Python; a level of `true` is still a mistake.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BankError(path, f"must be {_type_name(kind)}, not {type(value).__name__}", question=question, field=name)
    if kind is str and not value.strip():
        raise BankError(path, "must not be empty", question=question, field=name)
    return value


def _type_name(kind: type) -> str:
    return {str: "a string", int: "an integer", list: "a list", dict: "a table"}.get(kind, kind.__name__)


def _string_list(raw: Mapping[str, Any], name: str, path: Path, qid: str, *, min_items: int = 0) -> tuple[str, ...]:
    value = raw.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise BankError(path, "must be a list of non-empty strings", question=qid, field=name)
    if len(value) < min_items:
        raise BankError(path, f"needs at least {min_items} items", question=qid, field=name)
    if len(set(value)) != len(value):
        duplicate = next(v for v in value if value.count(v) > 1)
        raise BankError(path, f"lists {duplicate!r} twice", question=qid, field=name)
    return tuple(value)


def _load_any_order(raw: Mapping[str, Any], steps: tuple[str, ...], path: Path, qid: str) -> tuple[tuple[str, ...], ...]:
    """`any_order = [[1, 2]]`: places (from 1) of consecutive steps that are independent of each other."""
    value = raw.get("any_order", [])
    groups: list[tuple[str, ...]] = []
    used: set[int] = set()
    if not isinstance(value, list):
        raise BankError(path, "must be a list of lists of step places, e.g. [[1, 2]]", question=qid, field="any_order")
    for group in value:
        if (not isinstance(group, list) or len(group) < 2
                or not all(isinstance(place, int) and 1 <= place <= len(steps) for place in group)):
            raise BankError(path, f"each group lists at least two step places from 1 to {len(steps)}, e.g. [1, 2]",
                            question=qid, field="any_order")
        places = sorted(group)
        if places != list(range(places[0], places[0] + len(places))) or used & set(places):
            raise BankError(path, "a group's places must be consecutive and in no other group", question=qid,
                            field="any_order")
        used |= set(places)
        groups.append(tuple(steps[place - 1] for place in places))
    return tuple(groups)


def _load_question(
    path: Path,
    topic: str,
    raw: Any,
    answers_dir: Path,
    demos: Mapping[str, Any],
    functions: _LazyFunctions,
    index: int,
) -> Question:
    if not isinstance(raw, dict):
        raise BankError(path, f"question #{index + 1} must be a table", field="question")
    qid = raw.get("id")
    if not isinstance(qid, str) or not qid:
        raise BankError(path, f"question #{index + 1} has no id", field="id")
    if not _ID.match(qid):
        raise BankError(path, "must be lowercase words joined by hyphens (a-z, 0-9, -)", question=qid, field="id")

    kind = _require(raw, "kind", str, path, qid)
    if kind not in KINDS:
        raise BankError(path, f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}", question=qid, field="kind")
    allowed = _COMMON_FIELDS | _KIND_FIELDS[kind]
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise BankError(path, f"unknown field for a {kind} question; allowed: {', '.join(sorted(allowed))}", question=qid, field=unknown[0])
    level = _require(raw, "level", int, path, qid)
    if level not in LEVELS:
        raise BankError(path, f"level {level} is out of range; use 1 (fundamentals) to 4 (staff-level trade-offs)", question=qid, field="level")
    prompt = _require(raw, "prompt", str, path, qid)
    tags = _string_list(raw, "tags", path, qid)

    answer_file = answers_dir / f"{qid}.md"
    if not answer_file.is_file():
        raise BankError(path, f"the model answer {answer_file} does not exist; write answers/{qid}.md", question=qid, field="id")
    if not answer_file.read_text(encoding="utf-8").strip():
        raise BankError(path, f"the model answer {answer_file} is empty", question=qid, field="id")

    demo = _load_demo(raw, path, qid, demos)
    evidence = _string_list(raw, "evidence", path, qid)
    if evidence:
        if demo is None:
            raise BankError(path, "evidence names checks of a demo, so the question needs a demo", question=qid, field="evidence")
        known = _demo_checks(demos[demo.name])
        for check in evidence:
            if check not in known:
                raise BankError(path, f"demo {demo.name!r} has no check {check!r}; its checks are {', '.join(known)}", question=qid, field="evidence")

    kata = raw.get("kata")
    if kata is not None:
        from ddpfsdp.demos.katas.catalog import KATAS

        if not isinstance(kata, str) or kata not in KATAS:
            raise BankError(path, f"unknown kata {kata!r}; choose one of {', '.join(KATAS)}", question=qid, field="kata")

    fields: dict[str, Any] = {}
    if kind in ("single", "multi"):
        choices = _string_list(raw, "choices", path, qid, min_items=2)
        if "answer" not in raw:
            raise BankError(path, "is missing", question=qid, field="answer")
        answer = raw["answer"]
        if kind == "single":
            if not isinstance(answer, str):
                raise BankError(path, "a single-choice answer is the text of the correct choice", question=qid, field="answer")
            if answer not in choices:
                raise BankError(path, f"{answer!r} is not among the choices", question=qid, field="answer")
        else:
            if not isinstance(answer, list) or not answer or not all(isinstance(a, str) for a in answer):
                raise BankError(path, "a multi-choice answer is a non-empty list of choice texts", question=qid, field="answer")
            for item in answer:
                if item not in choices:
                    raise BankError(path, f"{item!r} is not among the choices", question=qid, field="answer")
            if len(set(answer)) != len(answer):
                raise BankError(path, "lists a choice twice", question=qid, field="answer")
            answer = tuple(answer)
        fields.update(choices=choices, answer=answer, why=_load_why(raw, choices, path, qid, "choice"))
    elif kind == "numeric":
        fields.update(_load_numeric(raw, path, qid, functions, demo))
    elif kind == "order":
        steps = _string_list(raw, "steps", path, qid, min_items=2)
        fields.update(steps=steps, why=_load_why(raw, steps, path, qid, "step"),
                      any_order=_load_any_order(raw, steps, path, qid))
    else:
        fields["talking_points"] = _string_list(raw, "talking_points", path, qid, min_items=1)

    return Question(
        id=qid,
        topic=topic,
        level=level,
        kind=kind,
        prompt=prompt,
        file=path,
        answer_file=answer_file,
        tags=tags,
        demo=demo,
        evidence=evidence,
        kata=kata,
        **fields,
    )


_WHY_ASKS = {
    "choice": "one line per choice, in the order of choices, saying why it is right or wrong",
    "step": "one line per step, in the order of steps, saying why the step comes where it does",
}


def _load_why(raw: Mapping[str, Any], items: tuple[str, ...], path: Path, qid: str, item: str) -> tuple[str, ...]:
    """The reasons, one per choice or step; a reason that is missing is as wrong as a choice that is."""
    if "why" not in raw:
        raise BankError(path, f"is missing; give {_WHY_ASKS[item]}", question=qid, field="why")
    why = _string_list(raw, "why", path, qid)
    if len(why) != len(items):
        raise BankError(path, f"has {len(why)} reasons for {len(items)} {item}s; give {_WHY_ASKS[item]}", question=qid, field="why")
    for number, line in enumerate(why, start=1):
        if "\n" in line.strip():
            raise BankError(path, f"reason {number} spans several lines; keep each reason to one line", question=qid, field="why")
    return why


def _demo_checks(demo: Any) -> list[str]:
    return list(getattr(demo, "checks", {}))


def _load_demo(raw: Mapping[str, Any], path: Path, qid: str, demos: Mapping[str, Any]) -> DemoLink | None:
    if "demo" not in raw:
        return None
    spec = raw["demo"]
    if not isinstance(spec, dict):
        raise BankError(path, 'must be a table: demo = { name = "fsdp", args = ["--model", "tiny"] }', question=qid, field="demo")
    unknown = sorted(set(spec) - {"name", "args"})
    if unknown:
        raise BankError(path, f"unknown field {unknown[0]!r}; a demo link has name and args", question=qid, field="demo")
    name = spec.get("name")
    if not isinstance(name, str) or name not in demos:
        from ddpfsdp.demos.registry import retired

        why = retired(name) if isinstance(name, str) else None
        raise BankError(path, why or f"unknown demo {name!r}; choose one of {', '.join(demos)}", question=qid,
                        field="demo.name")
    args = spec.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise BankError(path, "must be a list of strings", question=qid, field="demo.args")
    for arg in args:
        if arg.split("=")[0] in _LAUNCH_ARGS:
            raise BankError(path, f"{arg} is decided by whoever runs the demo; remove it", question=qid, field="demo.args")
    return DemoLink(name, tuple(args))


def _load_numeric(raw: Mapping[str, Any], path: Path, qid: str, functions: _LazyFunctions, demo: DemoLink | None) -> dict[str, Any]:
    spec = _require(raw, "calc", dict, path, qid)
    unknown = sorted(set(spec) - {"fn", "args"})
    if unknown:
        raise BankError(path, f"unknown field {unknown[0]!r}; calc has fn and args", question=qid, field="calc")
    fn_name = spec.get("fn")
    args = spec.get("args", {})
    if not isinstance(args, dict):
        raise BankError(path, "must be a table of keyword arguments", question=qid, field="calc.args")
    try:
        available = functions.get()
    except ImportError as error:
        raise BankError(path, f"the analytic model (ddpfsdp.demos.theory.quiz_answers) cannot be imported: {error}", question=qid, field="calc.fn") from None
    if not isinstance(fn_name, str) or fn_name not in available:
        raise BankError(path, f"unknown calc function {fn_name!r}; choose one of {', '.join(sorted(available))}", question=qid, field="calc.fn")
    try:
        value = available[fn_name](**args)
    except (TypeError, ValueError, KeyError) as error:
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
        raise BankError(path, f"{fn_name}({shown}) failed: {error}", question=qid, field="calc.args") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BankError(path, f"{fn_name} returned {value!r}, not a finite number", question=qid, field="calc.args")

    unit = raw.get("unit")
    if not isinstance(unit, str) or unit not in UNITS:
        shown = ", ".join(repr(u) for u in UNITS)
        raise BankError(path, f"unit {unit!r} is not one of {shown}", question=qid, field="unit")
    tolerance = raw.get("tolerance", DEFAULT_TOLERANCE)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < 1:
        raise BankError(path, f"tolerance {tolerance!r} must be a relative tolerance from 0 (exact) to below 1 (e.g. 0.05)", question=qid, field="tolerance")
    measure = raw.get("measure")
    if measure is not None:
        if not isinstance(measure, str) or not measure.strip():
            raise BankError(path, "must be a dotted path into the demo's result", question=qid, field="measure")
        if demo is None:
            raise BankError(path, "a measured quantity needs a demo that measures it", question=qid, field="measure")
    return {"calc": Calc(fn_name, dict(args)), "value": float(value), "unit": unit, "tolerance": float(tolerance), "measure": measure}

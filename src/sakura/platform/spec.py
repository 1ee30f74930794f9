"""Template spec files: the YAML list of templates a build turns into a KV library.

```yaml
templates:
  - id: face-astronaut          # the template id grammar of docs/architecture.md
    task: face_swap             # face_swap | try_on | style_transfer | custom
    image: skimage:astronaut    # a path relative to this file, or a bundled sample image
    prompt: put this face on the person in the photo
    resolution: 32              # optional; the model's own resolution when omitted
```

Every error names the file, the template and the field. Each image is checked from its header
(readable, an image, at most :data:`~sakura.platform.images.MAX_IMAGE_PIXELS`), not decoded.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sakura.platform.errors import ImageError, SpecError, did_you_mean
from sakura.platform.ids import validate_template_id
from sakura.platform.images import check_image
from sakura.platform.integrity import read_regular

MAX_SPEC_BYTES = 1 << 20
#: Nesting levels a spec may use (it needs 3: file, templates list, entry); PyYAML composes
#: recursively, so deeper documents would end in a RecursionError.
MAX_SPEC_DEPTH = 16


class Task(str, enum.Enum):
    FACE_SWAP = "face_swap"
    TRY_ON = "try_on"
    STYLE_TRANSFER = "style_transfer"
    CUSTOM = "custom"


class TemplateEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    task: Task
    image: str = Field(min_length=1, max_length=4096)
    prompt: str = Field(min_length=1, max_length=2000)
    resolution: int | None = Field(default=None, ge=8, le=4096)

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        return validate_template_id(value)


class TemplateSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    templates: list[TemplateEntry] = Field(min_length=1)
    #: Directory that relative image paths are resolved against (the spec file's folder).
    base_dir: Path = Path(".")


def load_spec(path: str | Path) -> TemplateSpec:
    """Read and validate a spec file; raise :class:`SpecError` naming file, template and field."""
    path = Path(path)
    try:
        data = read_regular(path, MAX_SPEC_BYTES)  # a FIFO or /dev/zero is refused, never read
        if len(data) > MAX_SPEC_BYTES:
            raise SpecError(f"{path}: spec is larger than {MAX_SPEC_BYTES} bytes")
        raw = yaml.load(data.decode("utf-8"), Loader=_BoundedLoader)
    except FileNotFoundError:
        raise SpecError(f"{path}: spec file not found") from None
    except _TooDeep:
        raise SpecError(f"{path}: YAML nested deeper than {MAX_SPEC_DEPTH} levels") from None
    except yaml.MarkedYAMLError as exc:
        raise SpecError(_yaml_problem(path, exc)) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SpecError(f"{path}: not a readable YAML file: {exc}") from None
    return parse_spec(raw, source=str(path), base_dir=path.parent)


def _yaml_problem(path: Path, exc: yaml.MarkedYAMLError) -> str:
    """One line naming the file, line and column and what the parser expected (PyYAML's own
    message says "<unicode string>" and spans five lines)."""
    def at(mark: Any) -> str:
        return f"line {mark.line + 1}, column {mark.column + 1}"

    mark = exc.problem_mark or exc.context_mark
    where = f", {at(mark)}" if mark is not None else ""
    context = f" ({exc.context}{' at ' + at(exc.context_mark) if exc.context_mark else ''})" if exc.context else ""
    return (f"{path}{where}: not valid YAML: {exc.problem or 'cannot parse'}{context}; "
            "check the indentation, quotes and brackets there")


class _TooDeep(yaml.YAMLError):
    pass


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses documents nested deeper than :data:`MAX_SPEC_DEPTH`."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self._depth >= MAX_SPEC_DEPTH:
            raise _TooDeep()
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def parse_spec(raw: Any, *, source: str, base_dir: Path) -> TemplateSpec:
    """Validate a parsed spec; a :class:`SpecError` lists every problem found, not only the first."""
    if not isinstance(raw, dict) or not isinstance(raw.get("templates"), list):
        raise SpecError(f"{source}: expected a mapping with a 'templates' list")
    problems: list[_Problem] = []
    entries = []
    for index, item in enumerate(raw["templates"]):
        name = item.get("id") if isinstance(item, dict) and isinstance(item.get("id"), str) else f"#{index + 1}"
        try:
            entries.append(TemplateEntry.model_validate(item))
        except ValidationError as exc:
            problems += [_Problem(name, ".".join(map(str, e["loc"])) or "(entry)", _message(e)) for e in exc.errors()
                         if not _answered(e, exc.errors())]
    ids: list[str] = [item["id"] for item in raw["templates"]
                      if isinstance(item, dict) and isinstance(item.get("id"), str)]
    problems += [_Problem(name, "id", "duplicate template id") for name in sorted({i for i in ids if ids.count(i) > 1})]
    for entry in entries:
        try:
            check_image(entry.image, base_dir)
        except ImageError as exc:
            problems.append(_Problem(entry.id, "image", str(exc)))
    if not raw["templates"]:
        problems.append(_Problem(None, "templates", "the spec lists no template"))
    problems += [_Problem(None, "base_dir" if key == "base_dir" else key, "not allowed in a spec" if key == "base_dir"
                          else "unknown key (a spec has only 'templates')") for key in raw if key != "templates"]
    if problems:
        raise SpecError(_summary(problems, source), [p.as_dict() for p in problems])
    return TemplateSpec(templates=entries, base_dir=base_dir)


@dataclass(frozen=True)
class _Problem:
    template: str | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"template {self.template!r}: " if self.template is not None else ""
        return f"{where}field '{self.field}': {self.message}"

    def as_dict(self) -> dict[str, str]:
        return {"template": self.template or "", "field": self.field, "message": self.message}


def _summary(problems: list[_Problem], source: str) -> str:
    if len(problems) == 1:
        return f"{source}: {problems[0]}"
    return f"{source}: {len(problems)} problems\n" + "\n".join(f"  {p}" for p in problems)


def _message(error: Any) -> str:
    """pydantic's message without its "Value error, " prefix (our validators' own words); an unknown
    field's names the field it may be a typo of."""
    if error["type"] == "extra_forbidden" and error["loc"]:
        return "unknown field" + did_you_mean(str(error["loc"][-1]), TemplateEntry.model_fields)
    return str(error["msg"]).removeprefix("Value error, ")


def _answered(error: Any, errors: list[Any]) -> bool:
    """A missing field that an unknown field's did-you-mean already names (``promt`` for
    ``prompt``): one problem, not two."""
    if error["type"] != "missing" or not error["loc"]:
        return False
    field = str(error["loc"][-1])
    return any(e["type"] == "extra_forbidden" and e["loc"] and did_you_mean(str(e["loc"][-1]), [field])
               for e in errors)

"""Every command and snippet in the docs runs in a test (issue 37, item 3), as far as it can run here.

The blocks of README.md and docs/*.md, by kind:

* ``sh`` blocks run in bash, every command a stub that records its arguments (variables, loops,
  ``$(...)``, quoting and continuation lines are bash's own); then each ``sakura ...`` command line
  parses with the ``sakura`` command's real parser (a delegated command's own), each
  ``python bench/X.py ...`` and ``python -m MODULE ...`` with that program's parser (its ``main``
  stops right after parsing), each ``make`` target is one the Makefile defines, each ``curl`` asks
  for a route of ``sakura.platform.http_api``, each ``pip install`` installs this checkout's own
  extras or a pin its constraints file holds, each script run by its path exists, and each path of
  ``examples/`` or ``infra/`` a command names exists. A line holding ``...`` (the rest left to the
  reader) only has its flags checked;
* inline code that is a command (``sakura ...``, ``python bench/...``, ``make ...``) has its flags
  checked the same way (its placeholders are the reader's);
* ``python`` blocks: the "embed the client" example runs against a live server in
  ``tests/unit/edge_client/test_readme.py``; every other one runs here, with the session's
  constructor checked against its real signature instead of opening one;
* the ``yaml`` template spec parses with the real spec schema (its images read);
* the architecture page's route list names routes the service has, and its source tree names
  files and folders that exist.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import inspect
import io
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from unittest import mock
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>\w*)[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.S | re.M)
#: The commands the docs' shell blocks may run, each with its checker below.
COMMANDS = ("make", "sakura", "python", "curl", "ray", "pip", "export", "xxd", "head")
EMBED_EXAMPLE = "<!-- embed-example:"


def _rel(doc: Path) -> str:
    return doc.relative_to(ROOT).as_posix()


def blocks(lang: str) -> list[tuple[str, int, str]]:
    """(doc, line, body) of every fenced block of ``lang`` ("" for none) in the docs, dedented."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for m in FENCE.finditer(text):
            if m.group("lang") == lang:
                indent = len(m.group("indent"))
                body = "\n".join(line[indent:] for line in m.group("body").splitlines())
                found.append((_rel(doc), text.count("\n", 0, m.start()) + 1, body))
    return found


# Shell blocks: bash runs them with every command stubbed, recording what each was called with.

def recorded_calls(script: str, tmp_path: Path) -> list[list[str]]:
    """The commands a shell block runs, each as its argument list, as bash expands them."""
    record = tmp_path / "calls"
    stubs = "".join(f'{name}() {{ _rec {name} "$@"; }}\n' for name in COMMANDS)
    # one write per call: a command sent to the background (``&``) records beside the next one
    prelude = (f"_rec() {{ local call; call=$(printf '%s\\037' \"$@\"); printf '%s\\n' \"$call\" "
               f">> {shlex.quote(str(record))}; }}\n"
               + stubs + "command_not_found_handle() { _rec \"$@\"; }\n")
    paths = {w for w in re.findall(r"(?m)^\s*([\w.-]+/[\w./-]+)", script)}  # a script run by its path
    prelude += "".join(f'{p}() {{ _rec {shlex.quote(p)} "$@"; }}\n' for p in sorted(paths))
    done = subprocess.run(["bash", "-c", prelude + script + "\nwait\n"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = record.read_text().splitlines() if record.exists() else []
    return [line.split("\x1f")[:-1] for line in lines]


class _Parsed(Exception):
    """Raised where a program's ``main`` has parsed its arguments: nothing of it runs after."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def _parse_in(main, argv: list[str], *, parse: bool) -> argparse.ArgumentParser:
    """Run ``main`` up to its ``parse_args``: parse ``argv`` there with the real parser (``parse``),
    or only hand back that parser. A bad command line fails with argparse's own message."""
    real = argparse.ArgumentParser.parse_args

    def stop(self, args=None, namespace=None):
        if parse:
            real(self, args, namespace)
        raise _Parsed(self)

    err = io.StringIO()
    with mock.patch.object(argparse.ArgumentParser, "parse_args", stop), \
            mock.patch.object(sys, "argv", ["prog", *argv]), contextlib.redirect_stderr(err):
        try:
            main(argv) if inspect.signature(main).parameters else main()
        except _Parsed as parsed:
            return parsed.parser
        except SystemExit as exc:
            raise AssertionError(f"{' '.join(argv)}: {err.getvalue().strip() or exc}") from None
    raise AssertionError(f"{main.__module__}.main returned without parsing its arguments")


def _bench_main(script: str):
    """The ``main`` of ``bench/X.py``, imported as the benches import each other."""
    path = ROOT / script
    assert path.is_file(), f"no {script}"
    name = f"_doc_bench_{path.stem}"
    if name not in sys.modules:
        sys.path.insert(0, str(ROOT / "bench"))
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(ROOT / "bench"))
    return sys.modules[name].main


def _program(args: list[str]):
    """(main, argv) of a ``sakura`` or ``python`` command line."""
    if args[0] == "sakura":
        from sakura import cli

        return cli._run, args[1:]
    assert args[0] == "python", args
    if args[1] == "-m":
        return importlib.import_module(args[2]).main, args[3:]
    return _bench_main(args[1]), args[2:]


def _subparser(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The (sub)command parser that reads ``argv``'s flags: its subcommand words followed."""
    for word in argv:
        if word.startswith("-"):
            break
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or word not in subs[0].choices:
            break
        parser = subs[0].choices[word]
    return parser


def check_command_line(args: list[str], *, flags_only: bool) -> None:
    """Parse a ``sakura`` or ``python`` command line with its program's real parser (only its flags
    where the line leaves the rest to the reader)."""
    main, argv = _program(args)
    if not flags_only:
        _parse_in(main, argv, parse=True)
        return
    if args[0] == "sakura" and argv and argv[0] in _delegated():
        main, argv = importlib.import_module(_delegated()[argv[0]]).main, argv[1:]
    parser = _subparser(_parse_in(main, [], parse=False), argv)
    known = parser._option_string_actions
    unknown = [a.split("=")[0] for a in argv if a.startswith("--") and a.split("=")[0] not in known]
    assert not unknown, f"{' '.join(args)}: no such flag {unknown} (known: {sorted(known)})"


def _delegated() -> dict[str, str]:
    from sakura import cli

    return cli.DELEGATED


def _make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))


def _routes() -> list[re.Pattern]:
    from sakura.platform import http_api

    templates = [v for k, v in vars(http_api).items() if k.isupper() and isinstance(v, str) and v.startswith("/v1")]
    return [re.compile("^" + re.sub(r"\\{[^}]*\\}", "[^/]+", re.escape(t)) + "$") for t in [*templates, "/healthz"]]


def check_pip_install(args: list[str]) -> None:
    """``pip install -c FILE SPEC...`` from the checkout: FILE exists, and each SPEC is the checkout
    with extras ``pyproject.toml`` defines (``.[edge]``) or a pin FILE holds word for word."""
    assert args[:1] == ["install"], f"pip {' '.join(args)}: only pip install"
    words = args[1:]
    assert "-c" in words, f"pip {' '.join(args)}: without the constraints file torch may come as a CUDA build"
    constraints = ROOT / words[words.index("-c") + 1]
    assert constraints.is_file(), f"pip {' '.join(args)}: no {constraints.name}"
    pins = {line.split("#")[0].strip() for line in constraints.read_text().splitlines()} - {""}
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    specs = [w for i, w in enumerate(words[1:], 1) if not w.startswith("-") and words[i - 1] != "-c"]
    assert specs, f"pip {' '.join(args)}: installs nothing"
    for spec in specs:
        local = re.fullmatch(r"\.\[([\w,-]+)\]", spec)
        if local:
            unknown = set(local.group(1).split(",")) - extras
            assert not unknown, f"pip {' '.join(args)}: no extra {sorted(unknown)} (pyproject has {sorted(extras)})"
        else:
            assert spec in pins, f"pip {' '.join(args)}: {spec} is not a pin of {constraints.name}"


def check_call(call: list[str], *, flags_only: bool = False) -> None:
    name, args = call[0], call[1:]
    for path in (a for a in args if re.match(r"(examples|infra)/", a)):
        assert (ROOT / path).exists(), f"{' '.join(call)}: no {path}"
    if name == "make":
        assert set(args) <= _make_targets(), f"make {' '.join(args)}: no such target"
    elif name in ("sakura", "python"):
        check_command_line(call, flags_only=flags_only or "..." in call)
    elif name == "curl":
        urls = [a for a in args if "localhost" in a or "://" in a]
        assert urls, call
        path = urlsplit(urls[0] if "://" in urls[0] else "http://" + urls[0]).path
        assert any(r.match(path) for r in _routes()), f"curl {path}: no such route in sakura.platform.http_api"
    elif name == "pip":
        check_pip_install(args)
    elif name == "ray":
        assert "--" in args, call
        check_call(args[args.index("--") + 1:], flags_only=flags_only)
    elif "/" in name:
        assert (ROOT / name).is_file(), f"no {name}"
    else:
        assert name in ("export", "xxd", "head"), f"a command no checker knows: {' '.join(call)}"


@pytest.mark.parametrize(("doc", "line", "script"), blocks("sh"), ids=lambda v: str(v)[:40])
def test_every_shell_block_runs_commands_that_exist(doc, line, script, tmp_path):
    calls = recorded_calls(script, tmp_path)
    assert calls, f"{doc}:{line}: the block ran no command"
    for call in calls:
        check_call(call)


def _inline_commands() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        text = FENCE.sub("", doc.read_text())
        for span in re.findall(r"`([^`]+)`", text):
            span = " ".join(span.split())
            if re.match(r"(sakura [a-z]|python (bench/|-m sakura)|make [a-z])", span):
                found.append((_rel(doc), span))
    return sorted(set(found))


@pytest.mark.parametrize(("doc", "command"), _inline_commands(), ids=lambda v: str(v)[:60])
def test_every_command_in_the_text_has_flags_its_program_knows(doc, command):
    words = shlex.split(command)
    if words[0] == "make":
        assert set(words[1:]) <= _make_targets(), f"{doc}: {command}: no such target"
        return
    check_command_line(words, flags_only=True)


@pytest.mark.parametrize(("script", "error"), [
    ("sakura catalog ls --store file://x --no-such-flag", "unrecognized arguments"),
    ("sakura serve --store file://x --port eighty", "invalid int value"),
    ("sakura edit ... --no-such-flag", "no such flag"),
    ("python bench/sensitivity.py --workload no-such-workload", "invalid choice"),
    ("python bench/no_such_bench.py", "no bench/no_such_bench.py"),
    ("make no-such-target", "no such target"),
    ("curl localhost:8000/v2/templates", "no such route"),
    ("frobnicate --now", "no checker knows"),
    ("pip install 'sakura-kv[edge]'", "without the constraints file"),
    ("pip install -c constraints.txt '.[phone]'", "no extra"),
    ("pip install -c constraints.txt torch==2.2.0", "not a pin"),
    ("sakura edit --server http://x --template t --image i --out o --trace examples/traces/nowhere", "no examples/"),
])
def test_a_command_the_docs_get_wrong_is_caught(script, error, tmp_path):
    with pytest.raises(AssertionError, match=error):
        for call in recorded_calls(script, tmp_path):
            check_call(call)


def test_bash_expands_a_block_as_a_reader_runs_it(tmp_path):
    script = ('A="--workload x --workload y"\n'
              'python bench/e2e.py $A \\\n  $(for s in a b; do echo --system $s; done) &\n')
    assert recorded_calls(script, tmp_path) == [["python", "bench/e2e.py", "--workload", "x", "--workload", "y",
                                                 "--system", "a", "--system", "b"]]


# Python blocks.

def test_every_python_block_runs(monkeypatch):
    """The embed-the-client example runs live in test_readme.py; every other block runs here, the
    session's constructor checked against its real signature rather than opening a session."""
    from sakura import edge_client

    made = []

    def session(*args, **kwargs):
        inspect.signature(edge_client.EdgeSession).bind(*args, **kwargs)
        made.append(kwargs)

    monkeypatch.setattr(edge_client, "EdgeSession", session)
    ran = 0
    for doc, line, body in blocks("python"):
        text = (ROOT / doc).read_text()
        if EMBED_EXAMPLE in text.splitlines()[line - 2]:
            continue
        exec(compile(body, f"{doc}:{line}", "exec"), {"key": "an-api-key"})
        ran += 1
    assert ran and made


def test_the_embed_example_is_the_one_test_readme_runs():
    examples = [(doc, body) for doc, line, body in blocks("python")
                if EMBED_EXAMPLE in (ROOT / doc).read_text().splitlines()[line - 2]]
    assert {doc for doc, _ in examples} == {"README.md", "docs/quickstart.md", "docs/embedding.md"}
    assert len({body for _, body in examples}) == 1


def test_the_template_spec_parses_with_the_real_schema():
    from sakura.platform.spec import parse_spec

    specs = blocks("yaml")
    assert specs
    for doc, line, body in specs:
        spec = parse_spec(yaml.safe_load(body), source=f"{doc}:{line}", base_dir=ROOT / "examples")
        assert spec.templates


# The architecture page's listings.

def test_the_route_list_names_routes_the_service_has():
    listing = next(body for doc, _, body in blocks("") if body.lstrip().startswith("GET  /healthz"))
    paths = [line.split()[1].split("?")[0] for line in listing.splitlines() if line.strip()]
    assert len(paths) >= 10
    unknown = [p for p in paths if not any(r.match(p) for r in _routes())]
    assert not unknown, unknown


def test_the_source_tree_names_what_exists():
    listing = next(body for doc, _, body in blocks("") if body.startswith("src/sakura/"))
    parents: list[tuple[int, Path]] = [(-1, ROOT)]
    missing = []
    for line in listing.splitlines():
        name = line.split()[0] if line.strip() else ""
        if not re.fullmatch(r"[\w.]+(/[\w.]+)*/?", name) or not (name.endswith("/") or name.endswith(".py")):
            continue  # a line of description
        indent = len(line) - len(line.lstrip())
        while parents[-1][0] >= indent:
            parents.pop()
        path = parents[-1][1] / name.rstrip("/")
        if not path.exists():
            missing.append(str(path.relative_to(ROOT)))
        if name.endswith("/"):
            parents.append((indent, path))
    assert not missing, missing

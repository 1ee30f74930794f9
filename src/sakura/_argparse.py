"""What every ``sakura`` command's parser shares: help that keeps the module docstring's layout
and shows every option's default. Standard library only (``sakura edit`` runs on the phone path)."""

from __future__ import annotations

import argparse
import functools


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The description as written; ``(default: X)`` after every option that has a default worth
    saying (not a flag's False, not None: such help says in words what happens without it)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (not action.option_strings or action.required or "%(default)" in text
                or action.default is None or action.default is False or action.default is argparse.SUPPRESS
                or action.default == []):
            return text
        return f"{text} (default: %(default)s)"


def command_parser(prog: str, description: str | None, **kwargs: object) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=prog, description=description, formatter_class=HelpFormatter, **kwargs)  # type: ignore[arg-type]


class SubcommandParser(argparse.ArgumentParser):
    """Every sub-command's parser: the shared help layout."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


def group(commands: argparse._SubParsersAction, name: str, *, help: str) -> argparse._SubParsersAction:
    """A command group (``sakura models``); run bare, it prints its own help."""
    parser = commands.add_parser(name, help=help, description=help)
    parser.set_defaults(run=functools.partial(_print_help, parser))
    return parser.add_subparsers(title=f"{name} commands", parser_class=SubcommandParser)


def _print_help(parser: argparse.ArgumentParser, _: argparse.Namespace) -> int:
    parser.print_help()
    return 2

"""The command line is one command line: every verb that shows or lists takes
`-o/--output table|json|yaml`, and every option says what it does in `--help`."""

from __future__ import annotations

from collections.abc import Iterator

import click

from distrun.cli.main import cli

# Verbs that act or follow rather than show: they print progress or a stream, not a record.
NOT_SHOWING = {
    "job stream",
    "stream",
    "logs",
    "job logs",
    "job cancel",
    "job download",
    "ui",
    "env prune",
    "environment prune",  # `env prune` under Azure ML's name
    "job archive",
    "job delete",
    "compute delete",
    "model download",
    "model archive",
    "model restore",
}
OUTPUTS = {"table", "json", "yaml"}


def _verbs(group: click.Group, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            yield from _verbs(command, path + " ")
        else:
            yield path, command


def _output(command: click.Command) -> click.Option | None:
    for param in command.params:
        if isinstance(param, click.Option) and "--output" in param.opts:
            return param
    return None


def test_every_verb_that_shows_or_lists_takes_table_json_and_yaml():
    wrong = []
    for path, command in _verbs(cli):
        if path in NOT_SHOWING:
            continue
        option = _output(command)
        if option is None or "-o" not in option.opts:
            wrong.append(f"{path}: no -o/--output")
        elif not isinstance(option.type, click.Choice) or set(option.type.choices) != OUTPUTS:
            wrong.append(f"{path}: -o takes {getattr(option.type, 'choices', option.type)}")
    assert not wrong, "\n".join(wrong)


def test_text_as_some_verbs_once_took_is_read_as_table():
    option = _output(cli.commands["job"].commands["show"])
    assert option is not None and option.type.convert("text", option, None) == "table"


def test_every_option_has_help():
    missing = [
        f"{path} {param.opts[0]}"
        for path, command in _verbs(cli)
        for param in command.params
        if isinstance(param, click.Option)
        and not param.help
        and not param.hidden
        and "--help" not in param.opts
        and "--version" not in param.opts
    ]
    assert not missing, "options without help:\n" + "\n".join(missing)


def test_the_walk_sees_every_group():
    seen = {path for path, _ in _verbs(cli)}
    assert {"job show", "data list", "component list", "compute list", "env show", "data mirror list"} <= seen


# Verbs about one job (`job create` names the job it makes, `job validate` and `job list` none).
ONE_JOB = {
    "job archive",
    "job show",
    "job stream",
    "stream",
    "job logs",
    "logs",
    "job cancel",
    "job stacks",
    "job download",
    "metrics",
}


def test_every_verb_about_one_job_takes_name_or_dash_n_and_defaults_to_the_newest():
    verbs = dict(_verbs(cli))
    wrong = []
    for path in sorted(ONE_JOB):
        params = verbs[path].params
        arguments = [p for p in params if isinstance(p, click.Argument) and p.name == "name"]
        dash_n = [p for p in params if isinstance(p, click.Option) and "-n" in p.opts and "--name" in p.opts]
        if not (arguments and not arguments[0].required and dash_n and "newest" in (dash_n[0].help or "")):
            wrong.append(path)
    assert not wrong, "verbs without an optional NAME and -n (default: the newest): " + ", ".join(wrong)


def _options(command: click.Command) -> set[str]:
    return {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}


def test_job_create_takes_every_option_run_dash_d_takes():
    run, create = cli.commands["run"], cli.commands["job"].commands["create"]
    # `run -d` starts in the background what `job create` starts there unless --stream.
    assert _options(run) - {"--detach", "-d"} == _options(create) - {"--file", "-f", "--stream", "-s"}

"""`distrun resident start|status|stop`: a process that keeps distrun loaded, so each
`distrun run` starts its first rank sooner (distrun.resident)."""

from __future__ import annotations

import sys
import time

import click

EXIT_NOT_RUNNING = 3  # as `systemctl status` says a service is not running


@click.group("resident")
def resident_group() -> None:
    """A resident process for this DISTRUN_HOME that `distrun run` hands its commands to.

    It loads distrun once; each `distrun run` then forks a copy of it instead of starting Python
    anew. The command runs as it would cold: same arguments, environment, folder and streams.
    """


def _home() -> str:
    from distrun.resident.wire import home_folder

    return home_folder()


@resident_group.command("start")
@click.option(
    "--idle-minutes",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="Leave after this long without a command.",
)
def resident_start(idle_minutes: float) -> None:
    """Start the resident process (or say that one already serves)."""
    from distrun.resident.control import start

    _show(start(_home(), idle_minutes * 60))


@resident_group.command("status")
def resident_status() -> None:
    """Whether a resident process serves this DISTRUN_HOME, and what it has done."""
    from distrun.resident.control import status

    answer = status(_home())
    if answer is None:
        click.echo(f"no resident process serves {_home()}")
        sys.exit(EXIT_NOT_RUNNING)
    _show(answer)


@resident_group.command("stop")
def resident_stop() -> None:
    """Stop it; commands it is running go on to their end."""
    from distrun.resident.control import stop

    pid = stop(_home())
    if pid is None:
        click.echo(f"no resident process serves {_home()}")
        return
    click.echo(f"stopped the resident process (pid {pid})")


def _show(answer: dict) -> None:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(answer["started"]))
    click.echo(f"resident process pid {answer['pid']} serves {_home()} since {started}")
    click.echo(f"  commands run: {answer['served']}, running now: {answer['running']}, run cold: {answer['refused']}")
    if answer["last_refusal"]:
        click.echo(f"  last run cold because {answer['last_refusal']}")
    click.echo(f"  leaves after {answer['idle_seconds'] / 60:g} idle minutes; `distrun resident stop` ends it now")

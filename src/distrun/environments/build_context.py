"""A Docker build context (`environment.build`) read as a conda file, without a container engine.

Most Azure ML build contexts are a Python base image plus `pip install` (or `conda install`) of
requirements. Such a Dockerfile says no more than a conda file does: a Python version (the base
image's tag, `python:3.10-slim`), conda packages and pip lines. distrun reads it as exactly that
mapping (`dependencies: [python=3.10, numpy=1.26, {pip: [-r <context>/requirements.txt]}]`), which
`conda_spec.read_conda_data` translates and checks as it does a conda file, so the environment is
built and cached the same way (the `-r` files are read in: the cache key covers their content).

Anything a virtual environment cannot reproduce (apt-get, a RUN of another program, a second
FROM, a file from outside the context) is a problem naming its `Dockerfile:LINE`: such a context
needs a container engine, or a conda_file instead. ENV values are kept for the ranks, except
the ones that describe the image's own layout (PATH, its conda prefix), which mean nothing here.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distrun.core.errors import Position, Problem
from distrun.core.safe_files import read_user_file
from distrun.environments.dockerfile import Instruction, parse_dockerfile

DOCKERFILE_LIMIT = 1 << 20
NOTE = (
    "environment.build: built as a uv environment from {dockerfile}'s pip steps, not as an image (no container "
    "engine here, containers switched off, its base image not in the engine's store, or a compute type without "
    "containers: docs/environments-and-data.md#a-docker-build-context)"
)
REFUSED_HINT = (
    "build it with a container engine (distrun will use one when it is present), or describe the environment "
    "as a conda_file (python version and pip packages) instead of a Docker build context"
)
# ENV values that name the image's own layout: meaningless (and harmful, for PATH) outside it.
IMAGE_LAYOUT_VARIABLES = frozenset(
    {"PATH", "LD_LIBRARY_PATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "HOME"}
)
# Instructions with no meaning for a virtual environment: metadata, or what Azure ML overrides (the command).
_IGNORED = frozenset({"LABEL", "USER", "CMD", "EXPOSE", "MAINTAINER", "STOPSIGNAL", "HEALTHCHECK"})
# Base images whose Python (or conda) a virtual environment stands in for.
_PYTHON_BASES = re.compile(
    r"(^|/)(python|pypy)$|conda|miniforge|mambaforge|micromamba|^mcr\.microsoft\.com/(azureml|aifx)/",
    re.IGNORECASE,
)
_TAG_PYTHON = (
    re.compile(r"^(\d)\.(\d{1,2})(?:$|[.\-])"),  # python:3.10-slim, python:3.11.4
    re.compile(r"(?:^|[^a-z])py(?:thon)?-?(\d)\.?(\d{1,2})(?:$|[^0-9])", re.IGNORECASE),  # ...-py310, python3.10
)
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
# Cleanup steps that change nothing a virtual environment would hold.
_NO_OPS = frozenset({"rm", "true", "set", "echo"})
_PIP_FLAGS = frozenset(
    {
        "--no-cache-dir",
        "-U",
        "--upgrade",
        "--no-deps",
        "-q",
        "--quiet",
        "-v",
        "--verbose",
        "--user",
        "--force-reinstall",
        "--ignore-installed",
        "-I",
        "--no-build-isolation",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "--no-warn-conflicts",
        "--break-system-packages",
        "--no-compile",
        "--compile",
        "--pre",
        "--prefer-binary",
        "--isolated",
        "--no-input",
        "--exists-action",
    }
)
_PIP_SKIPPED_VALUES = frozenset(
    {"--progress-bar", "--root-user-action", "--upgrade-strategy", "--timeout", "--retries", "--cache-dir", "--log"}
)
_PIP_PASSED = {  # options passed on as a line of the requirements
    "-i": "--index-url",
    "--index-url": "--index-url",
    "--extra-index-url": "--extra-index-url",
    "-f": "--find-links",
    "--find-links": "--find-links",
    "--trusted-host": "--trusted-host",
}
_CONDA_FLAGS = frozenset(
    {"-y", "--yes", "-q", "--quiet", "--override-channels", "--freeze-installed", "--no-update-deps", "-a", "--all"}
)
_CONDA_VALUES = frozenset({"-c", "--channel", "-n", "--name", "-p", "--prefix", "--solver"})


@dataclass
class ContextRequest:
    """What a build context asks for, as a conda file's mapping with the Dockerfile line of each
    entry, the ENV values for the ranks, and the problems that stop it from being built here."""

    dockerfile: Path
    conda_data: dict[str, Any] = field(default_factory=lambda: {"dependencies": []})
    lines: dict[int, int] = field(default_factory=dict)  # a conda dependency's index -> its Dockerfile line
    pip_lines: dict[int, int] = field(default_factory=dict)  # a pip line's index -> its Dockerfile line
    variables: dict[str, str] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)  # ENV names of the image's layout, not passed on
    problems: list[Problem] = field(default_factory=list)

    def position(self, *path: Any) -> Position:
        """Where the entry of `conda_data` at key path `path` was written (`read_conda_data` asks)."""
        if len(path) >= 4 and path[2] == "pip":
            return Position(str(self.dockerfile), self.pip_lines.get(path[3]))
        return Position(str(self.dockerfile), self.lines.get(path[1]) if len(path) > 1 else None)


def read_build_context(context: Path, dockerfile_path: str | None) -> ContextRequest:
    """The build context at `context` (its Dockerfile: `dockerfile_path`, default `Dockerfile`) read."""
    dockerfile = context / (dockerfile_path or "Dockerfile")
    request = ContextRequest(dockerfile)
    try:
        text = read_user_file(dockerfile, DOCKERFILE_LIMIT).decode("utf-8")
    except (OSError, ValueError) as exc:
        request.problems.append(
            Problem(
                f"the build context's Dockerfile {dockerfile} cannot be read: {getattr(exc, 'strerror', None) or exc}",
                "environment.build",
                None,
                "environment.build.path is the context folder (relative to the job file); "
                "dockerfile_path is the Dockerfile inside it (default: Dockerfile)",
            )
        )
        return request
    _Reader(context, request).read(parse_dockerfile(text))
    return request


class _Reader:
    """Walks the instructions once, keeping what a Docker build would know at each line:
    ARG and ENV values, the working folder, and which image paths hold which context files."""

    def __init__(self, context: Path, request: ContextRequest) -> None:
        self.context = context
        self.request = request
        self.values: dict[str, str] = {}
        self.workdir = "/"
        self.copied: list[tuple[str, Path]] = []  # image path -> the context file or folder copied there
        self.pip: list[str] = []
        self.seen_from = False

    def read(self, instructions: list[Instruction]) -> None:
        handlers = {
            "FROM": self._from,
            "ARG": self._arg,
            "ENV": self._env,
            "WORKDIR": self._workdir,
            "COPY": self._copy,
            "ADD": self._copy,
            "RUN": self._run,
        }
        for instruction in instructions:
            if instruction.keyword in _IGNORED:
                continue
            handler = handlers.get(instruction.keyword)
            if handler is None:
                self._refuse(instruction, f"{instruction.keyword} has no meaning for a virtual environment")
                continue
            handler(instruction)
        if self.pip:
            self.request.conda_data["dependencies"].append({"pip": self.pip})
        refused = self.request.problems
        if len(refused) > 1:  # one problem, naming the other lines: the hint is the same for each
            others = ", ".join(str(p.position.line) for p in refused[1:] if p.position is not None)
            first = refused[0]
            lines = "line {} needs" if len(refused) == 2 else "lines {} need"
            too = f" ({lines.format(others)} a container engine too): distrun builds"
            message = first.message.replace(": distrun builds", too, 1)
            self.request.problems = [Problem(message, first.key_path, first.position, first.hint)]

    def _refuse(self, instruction: Instruction, why: str) -> None:
        self.request.problems.append(
            Problem(
                f"{why}: distrun builds this build context as a virtual environment, which only "
                "RUN pip/conda install steps (and FROM, COPY, ADD, ENV, ARG, WORKDIR, LABEL, USER) can describe",
                "environment.build",
                Position(str(self.request.dockerfile), instruction.line),
                REFUSED_HINT,
            )
        )

    def _conda(self, spec: str, line: int) -> None:
        dependencies = self.request.conda_data["dependencies"]
        self.request.lines[len(dependencies)] = line
        dependencies.append(spec)

    def _pip_line(self, text: str, line: int) -> None:
        self.request.pip_lines[len(self.pip)] = line
        self.pip.append(text)

    def _expand(self, text: str) -> str:
        def value(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(3)
            if name in self.values:
                return self.values[name]
            return match.group(2) if match.group(2) is not None else match.group(0)

        return _VARIABLE.sub(value, text)

    # ------------------------------------------------------------ instructions

    def _from(self, instruction: Instruction) -> None:
        if self.seen_from:
            self._refuse(instruction, "a second FROM (a multi-stage build)")
            return
        self.seen_from = True
        words = self._expand(instruction.arguments).split()  # --platform is among the flags
        image = words[0] if words else ""
        name, _, tag = image.partition("@")[0].rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
        if not _PYTHON_BASES.search(name):
            self._refuse(instruction, f"FROM {image} is not a Python, conda or Azure ML base image")
            return
        version = _python_of(name.rsplit("/", 1)[-1], tag)
        if version is not None:
            self._conda(f"python={version}", instruction.line)

    def _arg(self, instruction: Instruction) -> None:
        name, has_default, default = instruction.arguments.partition("=")
        if has_default:
            self.values[name.strip()] = self._expand(_unquote(default.strip()))

    def _env(self, instruction: Instruction) -> None:
        for name, value in _env_pairs(instruction.arguments):
            value = self._expand(value)
            self.values[name] = value
            if name in IMAGE_LAYOUT_VARIABLES:
                if name not in self.request.left_out:
                    self.request.left_out.append(name)
            else:
                self.request.variables[name] = value

    def _workdir(self, instruction: Instruction) -> None:
        self.workdir = posixpath.normpath(posixpath.join(self.workdir, self._expand(_unquote(instruction.arguments))))

    def _copy(self, instruction: Instruction) -> None:
        if any(flag.startswith("--from") for flag in instruction.flags):
            self._refuse(instruction, f"{instruction.keyword} --from copies from another image")
            return
        words = list(instruction.json_form or shlex.split(self._expand(instruction.arguments)))  # --chown: a flag
        if len(words) < 2:
            self._refuse(instruction, f"{instruction.keyword} needs a source and a destination")
            return
        *sources, destination = words
        target = posixpath.normpath(posixpath.join(self.workdir, destination))
        into_folder = destination.endswith("/") or destination in (".", "./") or len(sources) > 1
        for source in sources:
            if "://" in source:
                self._refuse(instruction, f"{instruction.keyword} {source} downloads a file")
                continue
            found = sorted(self.context.glob(source)) if any(c in source for c in "*?[") else [self.context / source]
            for path in found:
                resolved = path.resolve()
                if not resolved.is_relative_to(self.context.resolve()) or not resolved.exists():
                    self._refuse(instruction, f"{instruction.keyword} {source}: not a file in the build context")
                    continue
                folder_copy = into_folder or len(found) > 1
                image_path = posixpath.join(target, path.name) if folder_copy and not resolved.is_dir() else target
                self.copied.append((image_path, resolved))

    def _run(self, instruction: Instruction) -> None:
        # Its flags (`--mount=type=cache`, `--network`) change how Docker runs it, not what it installs.
        if instruction.json_form is not None:
            commands = [list(instruction.json_form)]
        else:
            commands = _shell_commands(self._expand(instruction.arguments))
        if commands is None:
            self._refuse(instruction, "RUN uses pipes, redirections or subshells")
            return
        for argv in commands:
            why = self._command(argv, instruction.line)
            if why is not None:
                self._refuse(instruction, why)
                return

    # ------------------------------------------------------------ RUN commands

    def _command(self, argv: list[str], line: int) -> str | None:
        """Take in one command of a RUN; what is wrong with it, or None."""
        argv = _without_runner(argv)
        if not argv:
            return None
        program = posixpath.basename(argv[0])
        if program in _NO_OPS:
            return None
        if re.fullmatch(r"python(\d(\.\d+)?)?", program) and argv[1:3] == ["-m", "pip"]:
            argv, program = argv[2:], "pip"
        if re.fullmatch(r"pip(\d(\.\d+)?)?", program):
            return self._pip(argv[1:], line)
        if program in ("conda", "mamba", "micromamba"):
            return self._conda_command(argv[1:], line)
        return f"RUN {shlex.join(argv)} is not a pip or conda install"

    def _pip(self, args: list[str], line: int) -> str | None:
        if not args or args[0] in ("cache", "check", "list", "freeze", "--version"):
            return None
        if args[0] != "install":
            return f"pip {args[0]} is not an install"
        words = iter(_split_equals(args[1:]))
        for word in words:
            if word in ("-r", "--requirement", "-c", "--constraint"):
                file = self._context_file(next(words, ""))
                if file is None:
                    return f"pip {word}: the file is not one this Dockerfile copied from its build context"
                self._pip_line(f"{'-r' if word in ('-r', '--requirement') else '-c'} {file}", line)
            elif word in _PIP_PASSED:
                self._pip_line(f"{_PIP_PASSED[word]} {next(words, '')}", line)
            elif word == "--no-index":
                self._pip_line(word, line)
            elif word in _PIP_SKIPPED_VALUES:
                next(words, None)
            elif word in _PIP_FLAGS:
                continue
            elif word.startswith("-"):
                return f"pip install {word} is not an option distrun can carry into a virtual environment"
            else:
                local = self._context_file(word) if word.startswith((".", "/")) else None
                self._pip_line(str(local) if local is not None else word, line)
        return None

    def _conda_command(self, args: list[str], line: int) -> str | None:
        if not args or args[0] in ("clean", "config", "info", "list", "init", "--version"):
            return None
        if args[0] == "env" and args[1:2] in (["create"], ["update"]):
            return self._conda_env_file(args[2:], line)
        if args[0] not in ("install", "create"):
            return f"conda {args[0]} is not an install"
        words = iter(args[1:])
        for word in words:
            if word in _CONDA_VALUES:
                next(words, None)
            elif word.startswith("-"):
                if word not in _CONDA_FLAGS and not word.startswith(("--channel=", "--name=", "--prefix=")):
                    return f"conda {args[0]} {word} is not an option distrun can carry into a virtual environment"
            else:
                self._conda(word, line)
        return None

    def _conda_env_file(self, args: list[str], line: int) -> str | None:
        """`conda env create -f environment.yml`: its dependencies join the ones so far."""
        from distrun.core.errors import ValidationError
        from distrun.spec.yaml_source import read_yaml_file

        words = _split_equals(args)
        given = [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-f", "--file")]
        file = self._context_file(given[0]) if given else None
        if file is None:
            return "conda env needs -f FILE, a file this Dockerfile copied from its build context"
        try:
            data, _ = read_yaml_file(file)
        except ValidationError as exc:
            return f"conda file {file} cannot be read: " + "; ".join(p.render() for p in exc.problems)
        dependencies = data.get("dependencies") if isinstance(data, dict) else None
        for dep in dependencies if isinstance(dependencies, list) else []:
            if isinstance(dep, dict) and isinstance(dep.get("pip"), list):
                for entry in dep["pip"]:
                    self._pip_line(str(entry), line)
            else:
                self._conda(str(dep), line)
        return None

    def _context_file(self, image_path: str) -> Path | None:
        """The context file a path in the image holds (a COPY put it there), or None."""
        if not image_path:
            return None
        wanted = posixpath.normpath(posixpath.join(self.workdir, image_path))
        for copied, source in reversed(self.copied):
            if wanted == copied and source.is_file():
                return source
            if source.is_dir() and wanted.startswith(copied.rstrip("/") + "/"):
                candidate = (source / posixpath.relpath(wanted, copied)).resolve()
                if candidate.is_relative_to(source) and candidate.is_file():
                    return candidate
        return None


def _python_of(repository: str, tag: str) -> str | None:
    """The Python version an image's name and tag say (`python:3.10-slim`, `...-py310`), or None."""
    if repository.lower() in ("python", "pypy"):
        match = _TAG_PYTHON[0].match(tag)
        if match:
            return f"{match.group(1)}.{match.group(2)}"
    for text in (tag, repository):
        match = _TAG_PYTHON[1].search(text)
        if match:
            return f"{match.group(1)}.{match.group(2)}"
    return None


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def _env_pairs(arguments: str) -> list[tuple[str, str]]:
    """`ENV A=1 B="two words"` and the older `ENV A some value`."""
    first = arguments.split(None, 1)
    if first and "=" not in first[0]:
        return [(first[0], _unquote(first[1].strip()) if len(first) > 1 else "")]
    pairs = []
    for word in shlex.split(arguments):
        name, _, value = word.partition("=")
        pairs.append((name, value))
    return pairs


def _shell_commands(text: str) -> list[list[str]] | None:
    """A shell-form RUN as its commands (split at `&&` and `;`); None when it uses more of the shell."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars="&;|<>()")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in ("&&", ";"):
            commands.append([])
        elif token and set(token) <= set("&;|<>()"):
            return None
        else:
            commands[-1].append(token)
    return [argv for argv in commands if argv]


def _without_runner(argv: list[str]) -> list[str]:
    """`conda run -n ENV pip ...`, `conda run -p PREFIX python -m pip ...` -> the command run."""
    if len(argv) > 1 and posixpath.basename(argv[0]) in ("conda", "mamba", "micromamba") and argv[1] == "run":
        rest = iter(argv[2:])
        for word in rest:
            if word in ("-n", "--name", "-p", "--prefix"):
                next(rest, None)
            elif not word.startswith("-"):
                return [word, *rest]
        return []
    return argv


def _split_equals(args: list[str]) -> list[str]:
    """`--index-url=URL` -> `--index-url`, `URL`, as pip reads both."""
    out: list[str] = []
    for word in args:
        if word.startswith("--") and "=" in word:
            out.extend(word.split("=", 1))
        else:
            out.append(word)
    return out

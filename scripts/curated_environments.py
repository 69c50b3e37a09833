"""Regenerate distrun's table of Azure ML curated training environments from azureml-assets.

    python scripts/curated_environments.py PATH/TO/azureml-assets [--out FILE]

PATH is a clone of https://github.com/Azure/azureml-assets (bare or not): the table is read from
its HEAD commit with `git show`, and records that commit. Each environment under
`assets/training/*/environments/<dir>/` gives one entry: its name (asset.yaml), the image Azure
ML publishes it as (environment.yaml: `mcr.microsoft.com/<image.name>:latest`; asset.yaml says
`version: auto`, so the repository carries no version number), and its Python packages as a
conda file's mapping, gathered from what the Dockerfile installs:

  - context/conda_dependencies.yaml (conda packages and its `pip:` list);
  - each `pip install` (and `conda install` / `conda create`) of a RUN: its packages, its `-r`
    files from the context, its index URLs (as `--extra-index-url`, since they applied to that
    one command); commands on conda's `base` environment are left out (not the job's);
  - the torch version an ACPT base image's tag names (`...-torch280` -> torch==2.8.0), which that
    image has installed, unless a pip step names torch itself;
  - the Python version: the conda file's `python=`, else the base image tag's `pyNNN`, else
    spec.yaml's `Python` tag.

Pins that a pip step after the first one installs (security upgrades past what an earlier
package pins: `protobuf>=5.29.6` over tensorflow's `<5`) are listed again as `later_pins`:
distrun builds them as overrides, as the image's step-by-step `pip install` has them win.

Pins written as templates (`pkg=={{latest-pypi-version}}`) are left unpinned; any other templated
entry is left out. What the base image carries beyond that (system libraries, CUDA, MPI) is not
in the table: distrun builds the Python part only. Not run by the tests.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from distrun.environments.dockerfile import parse_dockerfile

OUT = Path(__file__).resolve().parent.parent / "src" / "distrun" / "environments" / "curated_environments.json"
ENVIRONMENTS = re.compile(r"^assets/training/[^/]+/environments/[^/]+/asset\.yaml$")
_PIN = re.compile(r"[=<>~!]=|[<>]")
_TEMPLATED_PIN = re.compile(r"^([A-Za-z0-9_.\-\[\],]+)\s*==\s*\{\{[^}]*\}\}$")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a clone of Azure/azureml-assets (bare or not)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    repo = Checkout(args.checkout)
    environments = {}
    for asset in sorted(p for p in repo.files() if ENVIRONMENTS.match(p)):
        entry = read_environment(repo, asset.rsplit("/", 1)[0])
        if entry is not None:
            name = entry.pop("name")
            environments[name] = entry
    table = {
        "source": "https://github.com/Azure/azureml-assets",
        "commit": repo.commit,
        "committed": repo.git("log", "-1", "--format=%cI", "HEAD").strip(),
        "generated_by": "scripts/curated_environments.py",
        "environments": dict(sorted(environments.items())),
    }
    args.out.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"{len(environments)} environments from {repo.commit[:12]} -> {args.out}")
    return 0


class Checkout:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.commit = self.git("rev-parse", "HEAD").strip()

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.path), *args], check=True, capture_output=True, text=True).stdout

    def files(self) -> list[str]:
        return self.git("ls-tree", "-r", "--name-only", self.commit).splitlines()

    def read(self, path: str) -> str | None:
        done = subprocess.run(["git", "-C", str(self.path), "show", f"{self.commit}:{path}"], capture_output=True)
        return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


def yaml_load(text: str) -> Any:
    from ruamel.yaml import YAML

    return YAML(typ="safe").load(text)


def read_environment(repo: Checkout, folder: str) -> dict[str, Any] | None:
    asset = yaml_load(repo.read(f"{folder}/asset.yaml") or "") or {}
    extra = yaml_load(repo.read(f"{folder}/{asset.get('extra_config') or 'environment.yaml'}") or "") or {}
    spec = yaml_load(repo.read(f"{folder}/{asset.get('spec') or 'spec.yaml'}") or "") or {}
    image = (extra.get("image") or {}) if isinstance(extra, dict) else {}
    context = f"{folder}/{(image.get('context') or {}).get('dir') or 'context'}"
    dockerfile = repo.read(f"{context}/{(image.get('context') or {}).get('dockerfile') or 'Dockerfile'}")
    if not asset.get("name") or dockerfile is None:
        return None
    conda: list[str] = []
    pip: list[str] = []
    conda_file = yaml_load(repo.read(f"{context}/conda_dependencies.yaml") or "") or {}
    channels = list(conda_file.get("channels") or []) if isinstance(conda_file, dict) else []
    for dep in (conda_file.get("dependencies") or []) if isinstance(conda_file, dict) else []:
        if isinstance(dep, dict):
            pip += [str(line) for line in dep.get("pip") or []]
        else:
            conda.append(str(dep))
    base = ""
    later: list[str] = []  # what pip steps after the first one install: they upgrade past earlier pins
    args: dict[str, str] = {}  # ARG defaults: `sglang==${SGLANG_VERSION}` is sglang==0.5.11
    for instruction in parse_dockerfile(dockerfile):
        if instruction.keyword == "ARG" and "=" in instruction.arguments:
            key, _, value = instruction.arguments.partition("=")
            args[key.strip()] = value.strip().strip("\"'")
        elif instruction.keyword == "FROM":
            base = instruction.arguments.split()[0]
        elif instruction.keyword == "RUN" and instruction.json_form is None:
            for argv in commands(expand(instruction.arguments, args)):
                before = len(pip)
                take_command(argv, repo, context, conda, pip)
                if before:
                    later += pip[before:]
    base_name, _, tag = base.partition(":")
    python = next((d.split("=", 1)[1].strip("=") for d in conda if re.match(r"^python\s*=", d)), None)
    found = re.search(r"py(\d)(\d+)", tag) or re.search(r"py(\d)(\d+)", base_name)
    if python is None and found:
        python = f"{found.group(1)}.{found.group(2)}"
    if python is None and isinstance(spec, dict) and (spec.get("tags") or {}).get("Python"):
        python = str(spec["tags"]["Python"])
    torch = re.search(r"torch(\d)(\d+)(\d)\b", base)
    if torch and not any(re.match(r"^torch\b(?![-_])", line) for line in pip):
        pip.insert(0, f"torch=={torch.group(1)}.{torch.group(2)}.{torch.group(3)}")
    dependencies: list[Any] = [f"python={python}"] if python else []
    dependencies += unique(clean(d) for d in conda if not re.match(r"^python\s*=", d))
    pip_lines = unique(clean(line) for line in pip)
    if pip_lines:
        dependencies.append({"pip": pip_lines})
    entry: dict[str, Any] = {
        "name": str(asset["name"]),
        "version": "latest",
        "image": f"mcr.microsoft.com/{image.get('name') or 'azureml/curated/' + str(asset['name'])}:latest",
        "path": folder,
        "base_image": base_name,
        "conda_file": {"channels": channels, "dependencies": dependencies}
        if channels
        else {"dependencies": dependencies},
    }
    later_pins = unique(line for line in map(clean, later) if _PIN.search(line) and not line.startswith("-"))
    if later_pins:
        entry["later_pins"] = later_pins
    return entry


def expand(text: str, args: dict[str, str]) -> str:
    """`${NAME}` and `$NAME` of an ARG with a default replaced by it; others are left as written."""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), text)


def commands(arguments: str) -> list[list[str]]:
    """A shell RUN's commands, split at `&&` and `;` (what does not split cleanly is skipped);
    a redirection (`2> /dev/null`, `>> log`) is no argument: it, its file descriptor and its
    target are left out."""
    lexer = shlex.shlex(arguments, posix=True, punctuation_chars="&;|<>()")
    lexer.whitespace_split = True
    out: list[list[str]] = [[]]
    target = False
    try:
        for token in lexer:
            if token in ("&&", ";", "||", "|"):
                out.append([])
            elif re.fullmatch(r"&?[<>]+&?", token):
                if out[-1] and out[-1][-1].isdigit():
                    out[-1].pop()  # the `2` of `2>`
                target = True
            elif target:
                target = False
            else:
                out[-1].append(token)
    except ValueError:
        return []
    return [argv for argv in out if argv]


def take_command(argv: list[str], repo: Checkout, context: str, conda: list[str], pip: list[str]) -> None:
    if argv[:2] == ["conda", "run"]:
        if "base" in argv[:6]:
            return  # conda's own base environment, not the job's
        argv = [w for w in argv[2:] if w not in ("--no-capture-output",)]
        while argv and argv[0] in ("-n", "-p", "--name", "--prefix"):
            argv = argv[2:]
    if argv and argv[0].startswith("/opt/miniconda/bin/"):
        return
    if len(argv) > 2 and re.fullmatch(r"(.*/)?python3?", argv[0]) and argv[1:3] == ["-m", "pip"]:
        argv = ["pip", *argv[3:]]
    program = argv[0].rsplit("/", 1)[-1] if argv else ""
    if re.fullmatch(r"pip3?", program) and argv[1:2] == ["install"]:
        words = iter(argv[2:])
        for word in words:
            if word in ("-r", "--requirement"):
                text = repo.read(f"{context}/{next(words, '').rsplit('/', 1)[-1]}") or ""
                pip += [line.split(" #")[0].strip() for line in text.splitlines() if line.strip()[:1] not in ("", "#")]
            elif word in ("-i", "--index-url", "--extra-index-url"):
                pip.append(f"--extra-index-url {next(words, '')}")
            elif word in ("--progress-bar", "--root-user-action", "-c", "--constraint", "-t", "--target"):
                next(words, None)
            elif not word.startswith("-") and "/" not in word and word != ".":
                pip.append(word)
    elif program in ("conda", "mamba") and argv[1:2] in (["install"], ["create"]):
        if any(argv[i : i + 2] == ["-n", "base"] for i in range(len(argv))):
            return
        words = iter(argv[2:])
        for word in words:
            if word in ("-c", "--channel", "-n", "--name", "-p", "--prefix"):
                next(words, None)
            elif not word.startswith("-"):
                conda.append(word)


def clean(line: str) -> str:
    """`pkg=={{latest-pypi-version}}` -> `pkg`; other templates -> "" (left out)."""
    line = line.split(" #")[0].strip()
    match = _TEMPLATED_PIN.match(line)
    if match:
        return match.group(1)
    return "" if "{{" in line else line


def unique(lines: Any) -> list[str]:
    out: list[str] = []
    for line in lines:
        if line and line not in out:
            out.append(line)
    return out


if __name__ == "__main__":
    sys.exit(main())

"""Regenerate distrun's table of Azure ML curated training environments from azureml-assets.

    python scripts/curated_environments.py PATH/TO/azureml-assets [--out FILE]
    python scripts/curated_environments.py --resolve-all [--workers N]

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

The same packages are also recorded as the image installs them, step by step, as `layers` (in
the Dockerfile's order): the base image's torch, the conda file's conda packages, its `pip:`
list, then each `pip install` (with `"upgrade": true` for `--upgrade`/`-U`, `"no_deps": true`
for `--no-deps`) and `conda install` of a RUN. pip lets each step replace what earlier steps
installed (security upgrades past what an earlier package pins: `distributed>=2026.1.0` over
azureml-train-automl-runtime's `dask<=2023.2.0`), which one request cannot hold: distrun
resolves and installs such an environment layer by layer (`distrun.environments.layered`).

Pins written as templates (`pkg=={{latest-pypi-version}}`) are left unpinned; any other templated
entry is left out. What the base image carries beyond that (system libraries, CUDA, MPI) is not
in the table: distrun builds the Python part only. Not run by the tests.

`--resolve-all` resolves every environment of distrun's table (not installing) as
tests/surfaces/test_curated_resolution.py does, and those that take packages from elsewhere than
PyPI with that part left out (said): one dated line per environment, for the docs.
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
_TEMPLATED_PIN = re.compile(r"^([A-Za-z0-9_.\-\[\],]+)\s*==\s*\{\{[^}]*\}\}$")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, nargs="?", help="a clone of Azure/azureml-assets (bare or not)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--resolve-all", action="store_true", help="resolve every environment of the table")
    parser.add_argument("--workers", type=int, default=12, help="resolutions at once (they wait on the network)")
    args = parser.parse_args()
    if args.resolve_all:
        return resolve_all(args.workers)
    if args.checkout is None:
        parser.error("give a clone of Azure/azureml-assets, or --resolve-all")
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


def resolve_all(workers: int) -> int:
    """Every environment of the table resolved, `workers` at a time; 1 when one does not resolve."""
    import datetime
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from distrun.environments.curated import table
    from distrun.environments.curated_resolution import NotResolved, build_layers, from_pypi, resolve_curated
    from distrun.environments.installer import uv_binary

    uv = uv_binary()
    if uv is None:
        print("uv is needed: pip install 'distrun[envs]'", file=sys.stderr)
        return 2
    names = sorted(table()["environments"], key=lambda name: -len(build_layers(name)[1]))

    def one(name: str) -> str:
        layers = build_layers(name)[1]
        pypi_only = not all(from_pypi(line) for layer in layers for line in layer.lines)
        with tempfile.TemporaryDirectory(prefix=f"curated-{name}-") as folder:
            try:
                found = resolve_curated(name, uv, Path(folder), pypi_only=pypi_only)
            except NotResolved as exc:
                return f"- {name}: does not resolve: {exc}"
        said = f", left out: {', '.join(found.left_out)}" if found.left_out else ""
        replaced = f", {len(found.replaced)} replaced by later steps" if found.replaced else ""
        return (
            f"- {name}: resolves ({found.steps} step{'s' if found.steps != 1 else ''}, Python {found.python}, "
            f"{found.platform}, {len(found.versions)} distributions{replaced}{said})"
        )

    started = datetime.datetime.now(datetime.timezone.utc)
    with ThreadPoolExecutor(workers) as pool:
        lines = dict(zip(names, pool.map(one, names), strict=True))
    print(f"Resolved {started:%Y-%m-%d %H:%M} UTC, table at {table()['commit'][:12]}, uv from PyPI:")
    for name in sorted(lines):
        print(lines[name], flush=True)
    return 1 if any(": does not resolve:" in line for line in lines.values()) else 0


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
    layers: list[dict[str, Any]] = [{"conda": list(conda)}, {"pip": list(pip)}]
    args: dict[str, str] = {}  # ARG defaults: `sglang==${SGLANG_VERSION}` is sglang==0.5.11
    for instruction in parse_dockerfile(dockerfile):
        if instruction.keyword == "ARG" and "=" in instruction.arguments:
            key, _, value = instruction.arguments.partition("=")
            args[key.strip()] = value.strip().strip("\"'")
        elif instruction.keyword == "FROM":
            base = instruction.arguments.split()[0]
        elif instruction.keyword == "RUN" and instruction.json_form is None:
            for argv in commands(expand(instruction.arguments, args)):
                before = (len(pip), len(conda))
                flags = take_command(argv, repo, context, conda, pip)
                if len(conda) > before[1]:
                    layers.append({"conda": conda[before[1] :]})
                if len(pip) > before[0]:
                    layers.append({"pip": pip[before[0] :], **{flag: True for flag in sorted(flags)}})
    base_name, _, tag = base.partition(":")
    python = next((d.split("=", 1)[1].strip("=") for d in conda if re.match(r"^python\s*=", d)), None)
    found = re.search(r"py(\d)(\d+)", tag) or re.search(r"py(\d)(\d+)", base_name)
    if python is None and found:
        python = f"{found.group(1)}.{found.group(2)}"
    if python is None and isinstance(spec, dict) and (spec.get("tags") or {}).get("Python"):
        python = str(spec["tags"]["Python"])
    torch = re.search(r"torch(\d)(\d+)(\d)\b", base)
    if torch:  # the base image has it installed: the first layer, whatever later steps do with it
        layers.insert(0, {"pip": [f"torch=={torch.group(1)}.{torch.group(2)}.{torch.group(3)}"]})
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
    entry["layers"] = [
        {**layer, key: cleaned}
        for layer in layers
        for key in ("conda" if "conda" in layer else "pip",)
        if (cleaned := unique(clean(line) for line in layer[key] if not re.match(r"^python\s*=", line)))
    ]
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


def take_command(argv: list[str], repo: Checkout, context: str, conda: list[str], pip: list[str]) -> set[str]:
    """Adds what one command installs to `conda` and `pip`; returns the layer's flags
    (`upgrade`, `no_deps`) for a `pip install`."""
    flags: set[str] = set()
    if argv[:2] == ["conda", "run"]:
        if "base" in argv[:6]:
            return flags  # conda's own base environment, not the job's
        argv = [w for w in argv[2:] if w not in ("--no-capture-output",)]
        while argv and argv[0] in ("-n", "-p", "--name", "--prefix"):
            argv = argv[2:]
    if argv and argv[0].startswith("/opt/miniconda/bin/"):
        return flags
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
            elif word in ("-U", "--upgrade", "--no-deps"):
                flags.add("no_deps" if word == "--no-deps" else "upgrade")
            elif not word.startswith("-") and "/" not in word and word != ".":
                pip.append(word)
    elif program in ("conda", "mamba") and argv[1:2] in (["install"], ["create"]):
        if any(argv[i : i + 2] == ["-n", "base"] for i in range(len(argv))):
            return flags
        words = iter(argv[2:])
        for word in words:
            if word in ("-c", "--channel", "-n", "--name", "-p", "--prefix"):
                next(words, None)
            elif not word.startswith("-"):
                conda.append(word)
    return flags


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

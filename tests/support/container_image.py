"""The test image: a tiny rootfs that runs this machine's own Python and the test venv.

No image can be pulled on a test machine, and copying a Python with torch into an image would
be gigabytes. So the image holds only empty mount points, a marker file and a PATH; the
containers that run it mount this machine's /usr, /lib, /lib64, /bin, the venv and the Python it
was made from, read-only (`container_mounts`, given to distrun as config.yaml's
`containers.mounts`). It is a test image, not a way to build real ones.

The image is named by the digest of what it is made of, and the tar it is imported from is kept
in `$DISTRUN_IMAGE_CACHE` (default ~/.cache/distrun-test-images): a second run finds the image in
podman's store (or imports the kept tar) instead of building it again.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

MARKER = "distrun-test-image"  # a file at the image's root: a process that sees it runs in the image
_SYSTEM = ("/usr", "/lib", "/lib64", "/bin")


def _host_paths() -> list[str]:
    paths = [p for p in _SYSTEM if os.path.isdir(p)]
    for prefix in (sys.prefix, sys.base_prefix, os.path.realpath(sys.base_prefix)):
        if prefix not in paths and not any(prefix.startswith(p + "/") for p in _SYSTEM):
            paths.append(prefix)
    return paths


def container_mounts() -> list[str]:
    """What every container of the test image needs mounted (read-only, at the same paths)."""
    return [f"{path}:{path}:ro" for path in _host_paths()]


def _path_env() -> str:
    return f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin"


def _rootfs_tar() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        folders = sorted({"tmp", "etc", "root", *(p.strip("/") for p in _host_paths())})
        for folder in folders:
            parts = folder.split("/")
            for depth in range(1, len(parts) + 1):
                info = tarfile.TarInfo("/".join(parts[:depth]))
                info.type, info.mode = tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755
                if info.name not in tar.getnames():
                    tar.addfile(info)
        marker = b"the distrun test image\n"
        info = tarfile.TarInfo(MARKER)
        info.size = len(marker)
        tar.addfile(info, io.BytesIO(marker))
    return buffer.getvalue()


def built_test_image() -> str:
    """The test image's name, built (or imported from the kept tar) only when podman lacks it."""
    content = _rootfs_tar()
    digest = hashlib.sha256(content + _path_env().encode()).hexdigest()[:16]
    image = f"localhost/distrun-test-python:{digest}"
    if subprocess.run(["podman", "image", "exists", image], check=False).returncode == 0:
        return image
    cache = Path(os.environ.get("DISTRUN_IMAGE_CACHE", Path.home() / ".cache" / "distrun-test-images"))
    cache.mkdir(parents=True, exist_ok=True)
    tar = cache / f"distrun-test-python-{digest}.tar"
    if not tar.is_file():
        tmp = tar.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(content)
        tmp.replace(tar)
    subprocess.run(
        ["podman", "import", "--change", f"ENV PATH={_path_env()}", str(tar), image],
        check=True,
        capture_output=True,
    )
    return image


def use_test_image(home: Path) -> str:
    """The test image, with DISTRUN_HOME's config.yaml (kept as it is otherwise) mounting what it needs."""
    import shutil

    import yaml

    if shutil.which("podman") is None:
        raise AssertionError("podman is not installed: run scripts/deps/55-containers.sh")
    home.mkdir(parents=True, exist_ok=True)
    config_path = home / "config.yaml"
    config = (yaml.safe_load(config_path.read_text()) if config_path.exists() else None) or {}
    config["containers"] = {"mounts": container_mounts()}
    config_path.write_text(yaml.safe_dump(config))
    return built_test_image()


# A 2 x 2 PyTorch job in the test image: each rank says where it runs and what it summed, and
# writes MASTER_ADDR into its outputs (which must come back with the user's ownership).
DDP_JOB = """
command: python check.py
code: src
environment:
  image: {image}
resources:
  instance_count: 2
limits:
  grace_period: 2
distribution:
  type: pytorch
  process_count_per_instance: 2
"""

DDP_CHECK = f"""
import os
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1) * dist.get_rank()
dist.all_reduce(t)
inside = os.path.exists("/{MARKER}")
print(f"rank {{dist.get_rank()}} of {{dist.get_world_size()}} sum {{int(t.item())}} in image {{inside}}", flush=True)
with open(f"outputs/rank_{{dist.get_rank()}}.txt", "w") as handle:
    handle.write(os.environ["MASTER_ADDR"])
# Each rank's file in /dev/shm: how many a rank sees says whether the node's containers share it.
shm = f"/dev/shm/distrun-test-{{os.environ['MASTER_PORT']}}-"
open(shm + str(dist.get_rank()), "w").close()
dist.barrier()
seen = sum(os.path.exists(shm + str(r)) for r in range(dist.get_world_size()))
print(f"rank {{dist.get_rank()}} sees {{seen}} ranks' files in /dev/shm", flush=True)
dist.barrier()
os.unlink(shm + str(dist.get_rank()))
dist.destroy_process_group()
"""


def containers_of(image: str) -> list[str]:
    """The names of podman's containers of `image`, running or not."""
    listed = subprocess.run(
        ["podman", "ps", "--all", "--filter", f"ancestor={image}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return listed.stdout.split()

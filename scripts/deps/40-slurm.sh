#!/usr/bin/env bash
# Slurm (controller, node daemon, client tools) and munge, for the tests that start a real
# 2-node Slurm cluster on this machine (tests/support/clusters/slurm_cluster.py). No daemon is
# started here: the test fixture starts its own, with its own config and ports.
set -euo pipefail
need=()
for tool in sbatch slurmctld slurmd munged; do
    command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
if [ ${#need[@]} -eq 0 ]; then
    exit 0
fi
echo "installing Slurm and munge (missing: ${need[*]})"
if [ "$(id -u)" -ne 0 ]; then
    sudo=sudo
else
    sudo=
fi
export DEBIAN_FRONTEND=noninteractive
# Wait for the package lock (another apt run, unattended upgrades) instead of failing at once.
$sudo apt-get -o DPkg::Lock::Timeout=600 update -q
$sudo apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends slurmctld slurmd slurm-client munge

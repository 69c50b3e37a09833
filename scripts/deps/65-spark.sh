#!/usr/bin/env bash
# Java for Spark jobs (`type: spark`): pyspark, from the `spark` extra that the test extras
# include, runs spark-submit and Spark's master and workers on a JVM, Java 17 or later.
# Skipped where a java of 17 or later is already on PATH.
set -euo pipefail
java_major() {
    java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1
}
if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ] 2>/dev/null; then
    exit 0
fi
sudo_cmd=""
if [ "$(id -u)" != "0" ]; then sudo_cmd="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get -o DPkg::Lock::Timeout=600 update -qq
$sudo_cmd apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends openjdk-17-jre-headless >/dev/null

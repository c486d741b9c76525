#!/bin/bash
# Installs the Debian packages of tools/packages.txt (as root, or through sudo).
set -euo pipefail
list="$(dirname "${BASH_SOURCE[0]}")/packages.txt"
sudo=
[ "$(id -u)" = 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
# shellcheck disable=SC2046 # one package per word
$sudo apt-get install -y --no-install-recommends $(sed 's/#.*//' "$list")

#!/usr/bin/env bash
# Installs the Debian packages Tender needs, only those that are missing.
# Runs as root (CI, fresh machines) or through sudo when available.
set -euo pipefail

packages=(pkg-config libssl-dev libcurl4-openssl-dev libpq-dev libmicrohttpd-dev
          postgresql-15 postgresql-client-15 wrk procps openssl curl ca-certificates python3 python3-venv
          patroni etcd-server etcd-client haproxy pgbouncer python3-h2 nftables iproute2)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "tender: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "tender: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# The postgresql-common package would create and start a system cluster; Tender runs its own.
if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
  $sudo mkdir -p /etc/postgresql-common
  echo "create_main_cluster = false" | $sudo tee /etc/postgresql-common/createcluster.conf >/dev/null
fi
# etcd-server, haproxy, pgbouncer and patroni would start system services on install; Tender's cluster
# test runs its own (deploy/cluster/). A policy-rc.d that refuses keeps the packages from starting any,
# removed again after the install when this script put it there.
policy=/usr/sbin/policy-rc.d
placed=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  placed=1
fi
trap '[ $placed = 1 ] && $sudo rm -f "$policy"' EXIT
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

#!/usr/bin/env bash
# Installs what the browser tests need, only what is missing: Debian's chromium and chromium-driver
# (apt), and Selenium with its dependencies pinned (Tests/Browser/requirements.txt) in a virtualenv under
# $TENDER_DATA_DIR/browser-venv. Prints the venv's python.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
requirements="$root/Tests/Browser/requirements.txt"
data_dir="${TENDER_DATA_DIR:-$(pwd)/.tender}"
venv="$data_dir/browser-venv"

packages=(chromium chromium-driver python3 python3-venv fonts-dejavu-core)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "tender: installing ${missing[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "tender: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's python3 (not whatever python3 comes first in PATH), so the venv module is the one apt installed.
python=/usr/bin/python3
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" >&2
fi
stamp="$venv/requirements.installed"
if ! cmp -s "$requirements" "$stamp"; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements" >&2
  cp "$requirements" "$stamp"
fi
echo "$venv/bin/python"

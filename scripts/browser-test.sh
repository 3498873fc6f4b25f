#!/usr/bin/env bash
# Real-browser tests: installs Chromium, chromedriver and the pinned Selenium (scripts/browser-deps.sh),
# then runs Tests/Browser/browser_test.py against the built `tender` (TENDER_BINARY, default the debug
# build). The test starts its own `tender serve` on a free loopback port with a fresh database created
# beside TENDER_DATABASE_URL's. Screenshots: $TENDER_DATA_DIR/browser-artifacts/. BROWSER_ONLY=test_a,test_b
# runs a subset.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export TENDER_DATA_DIR="${TENDER_DATA_DIR:-$root/.tender}"
python="$("$root/scripts/browser-deps.sh")"
export TENDER_BINARY="${TENDER_BINARY:-$root/.build/debug/tender}"
# Loopback only: no proxy may see the test's traffic.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
exec "$python" "$root/Tests/Browser/browser_test.py"

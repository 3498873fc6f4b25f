#!/usr/bin/env bash
# Proves the release binary runs on a server without the Swift toolchain: no library is resolved from
# the toolchain, and the binary works (Foundation, OpenSSL, JSON, dates) with the toolchain directory
# hidden by an empty bind mount in a private mount namespace and an empty environment.
#   scripts/check-release.sh [BINARY]      (default .build/release/tender; run `make release` first)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
binary="$(realpath "${1:-$here/.build/release/tender}")"
[ -x "$binary" ] || { echo "check-release: $binary not found (make release)" >&2; exit 1; }
toolchain="$(dirname "$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")")"  # /opt/swift
fail() { echo "check-release: FAIL: $*" >&2; exit 1; }

# 1. The dynamic section names no Swift runtime library, and none resolves inside the toolchain.
if ldd "$binary" | grep -E "libswift|libFoundation|libdispatch|libBlocksRuntime|$toolchain" >&2; then
  fail "the binary links the Swift runtime dynamically (build with --static-swift-stdlib)"
fi
if readelf -d "$binary" | grep -E "RPATH|RUNPATH" | grep -q "$toolchain"; then
  fail "the binary's RPATH points into $toolchain"
fi

# 2. It runs with the toolchain out of reach: offline verify + decrypt of Apple's published test
#    token at its signing time (Foundation JSON and dates, OpenSSL CMS and ECDH), and --help.
vector="$here/Tests/ApplePayTokenTests/Vectors/gala-2023"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$binary" "$work/tender"
cp "$vector/token.json" "$vector/certificate.pem" "$vector/private_key.pem" "$work/"
inner=$(cat <<INNER
set -e
mount --bind "$work/empty" "$toolchain"
[ -z "\$(ls -A "$toolchain")" ] || { echo "toolchain still visible" >&2; exit 1; }
cd "$work"
env -i LD_LIBRARY_PATH= PATH=/usr/bin:/bin ./tender --help >/dev/null
env -i LD_LIBRARY_PATH= PATH=/usr/bin:/bin TENDER_APPLE_ROOTS= ./tender token decrypt --token token.json \
  --certificate certificate.pem --private-key private_key.pem --at 2021-09-01T19:03:06Z > decrypted.json
INNER
)
mkdir "$work/empty"
if ! unshare -m --propagation private bash -c "$inner"; then fail "the binary does not run without $toolchain"; fi
grep -q '"masked" : true' "$work/decrypted.json" || grep -q '"masked":true' "$work/decrypted.json" \
  || fail "decrypt output unexpected: $(head -c 300 "$work/decrypted.json")"
echo "check-release: ok ($binary runs without $toolchain)"

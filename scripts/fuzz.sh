#!/usr/bin/env bash
# Fuzzes Apple Pay token, CMS and X.509 parsing with libFuzzer for N seconds (default 60).
#   scripts/fuzz.sh [seconds]
# Compiles Sources/{Money,Crypto,ApplePayToken} and fuzz/TokenFuzz.swift with
# -sanitize=fuzzer,address into .build/fuzz/token-fuzz, seeds a corpus from the test vectors, runs it,
# and copies any crashing input into Tests/ApplePayTokenTests/crashers/ (replayed by CrasherReplayTests).
set -euo pipefail
seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/.build/fuzz"
mkdir -p "$out/obj" "$out/corpus" "$out/artifacts"
# -package-name: `package` declarations (ApplePayToken's JSONReader) are visible only within a named package.
flags=(-parse-as-library -sanitize=fuzzer,address -O -g -wmo -swift-version 6 -enable-upcoming-feature ExistentialAny -package-name tender)

build_module() { # name, extra flags…
  local name="$1"; shift
  swiftc "${flags[@]}" -module-name "$name" -emit-module -emit-module-path "$out/obj/$name.swiftmodule" \
    -I "$out/obj" "$@" -c -o "$out/obj/$name.o" $(find "$root/Sources/$name" -name '*.swift' | sort)
}

# Rebuild only when a source changed.
stamp="$out/obj/sources.sha"
sum="$(cat $(find "$root/Sources/Money" "$root/Sources/Crypto" "$root/Sources/ApplePayToken" "$root/fuzz" -name '*.swift' | sort) "$0" | sha256sum | cut -d' ' -f1)"
if [ ! -x "$out/token-fuzz" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$sum" ]; then
  echo "fuzz: compiling (sanitizers on)…" >&2
  build_module Money
  build_module Crypto -I "$root/Sources/COpenSSL"
  build_module ApplePayToken -I "$root/Sources/COpenSSL"
  swiftc "${flags[@]}" -I "$out/obj" -I "$root/Sources/COpenSSL" "$root/fuzz/TokenFuzz.swift" \
    "$out/obj/Money.o" "$out/obj/Crypto.o" "$out/obj/ApplePayToken.o" -lssl -lcrypto -o "$out/token-fuzz" 2>&1 \
    | grep -v "Cannot export local symbol '__asan" >&2 || true
  [ -x "$out/token-fuzz" ] || { echo "fuzz: build failed" >&2; exit 1; }
  echo "$sum" > "$stamp"
fi

# Seeds: every token and certificate in the vectors, the decoded CMS signatures, and past crashers.
vectors="$root/Tests/ApplePayTokenTests/Vectors"
crashers="$root/Tests/ApplePayTokenTests/crashers"
for f in $(find "$vectors" -name '*.json' -o -name '*.pem'); do
  cp "$f" "$out/corpus/seed-$(sha256sum "$f" | cut -c1-16)"
done
for f in $(find "$vectors" -name 'token*.json'); do
  python3 - "$f" "$out/corpus" <<'PY' || true
import base64, hashlib, json, sys
doc = json.load(open(sys.argv[1]))
pd = doc.get("paymentData", doc)
sig = base64.b64decode(pd["signature"])
open(f"{sys.argv[2]}/cms-{hashlib.sha256(sig).hexdigest()[:16]}", "wb").write(sig)
PY
done
find "$crashers" -type f ! -name 'README.md' ! -name '.keep' -exec cp {} "$out/corpus/" \;

rm -f "$out"/artifacts/*
echo "fuzz: running ${seconds}s" >&2
set +e
SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 "$out/token-fuzz" "$out/corpus" \
  -max_total_time="$seconds" -max_len=40000 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$out/artifacts/" -print_final_stats=1 2> "$out/last-run.log"
status=$?
set -e
tail -n 12 "$out/last-run.log" >&2
found=0
for f in "$out"/artifacts/crash-* "$out"/artifacts/leak-* "$out"/artifacts/timeout-* "$out"/artifacts/oom-*; do
  [ -e "$f" ] || continue
  cp "$f" "$crashers/" && found=1
  echo "fuzz: saved $(basename "$f") to Tests/ApplePayTokenTests/crashers/" >&2
done
if [ $status -ne 0 ] || [ $found = 1 ]; then
  echo "fuzz: FAILED (exit $status); see $out/last-run.log" >&2
  exit 1
fi
echo "fuzz: no crash in ${seconds}s" >&2

#!/usr/bin/env bash
# Apple Pay token throughput on one core (issue "Benchmark"): decrypt only, full verification with the
# verified-chain cache, and without it; beside OpenSSL's own P-256 figures and the limit
# 1 / (one ECDH + one ECDSA verify), measured in the same run on the same core, both per CPU second (what
# openssl speed divides by), so that neighbours on a shared machine do not skew the ratio. Prints figures and the
# ratio line tokens_vs_openssl_limit; never fails on a stopwatch. Tender's own ECDH, CMS signature check and token
# parse are timed alone beside them, to show where a token's time goes.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${BENCH_TOKEN_SECONDS:-3}"
bin="${TENDER_BIN:-.build/release/tender}"
[ -x "$bin" ] || swift build -c release >/dev/null
out=$(taskset -c 0 "$bin" bench tokens --seconds "$seconds" 2>/dev/null || "$bin" bench tokens --seconds "$seconds")
speed=$(taskset -c 0 openssl speed -seconds "$seconds" ecdhp256 ecdsap256 2>/dev/null || openssl speed -seconds "$seconds" ecdhp256 ecdsap256 2>/dev/null)
decrypt=$(awk '/decrypt_only/ {print $3}' <<<"$out")
cached=$(awk '/full_verification_chain_cache/ {print $3}' <<<"$out")
uncached=$(awk '/full_verification_no_cache/ {print $3}' <<<"$out")
ecdh_own=$(awk '/ecdh_only/ {print $3}' <<<"$out")
cms_own=$(awk '/cms_signature_check_only/ {print $3}' <<<"$out")
parse_own=$(awk '/token_json_parse_only/ {print $3}' <<<"$out")
# openssl speed: "256 bits ecdh (nistp256) <time> <op/s>"; "256 bits ecdsa (nistp256) <sign s> <verify s> <sign/s> <verify/s>".
ecdh=$(awk '/ecdh \(nistp256\)/ {print $NF; exit}' <<<"$speed")
verify=$(awk '/ecdsa \(nistp256\)/ {print $NF; exit}' <<<"$speed")
python3 - "$decrypt" "$cached" "$uncached" "$ecdh" "$verify" "$ecdh_own" "$cms_own" "$parse_own" <<'PY'
import sys
decrypt, cached, uncached, ecdh, verify, ecdh_own, cms_own, parse_own = (float(x) for x in sys.argv[1:])
limit = 1 / (1 / ecdh + 1 / verify)
print()
print(f"{'Apple Pay tokens, one core':<48} {'tokens/s':>10}")
print(f"{'decrypt only (ECDH + KDF + AES-GCM + parse)':<48} {decrypt:>10.0f}")
print(f"{'full verification, chain cache':<48} {cached:>10.0f}")
print(f"{'full verification, no chain cache':<48} {uncached:>10.0f}")
print(f"{'openssl speed ecdhp256 (op/s)':<48} {ecdh:>10.0f}")
print(f"{'openssl speed ecdsap256 verify (op/s)':<48} {verify:>10.0f}")
print(f"{'limit 1/(ECDH + verify)':<48} {limit:>10.0f}")
print(f"{'tender ECDH alone (op/s)':<48} {ecdh_own:>10.0f}")
print(f"{'tender CMS signature check alone (op/s)':<48} {cms_own:>10.0f}")
print(f"{'tender token JSON parse alone (op/s)':<48} {parse_own:>10.0f}")
print(f"full verification with cache / limit: {100 * cached / limit:.0f}% (goal >= 75%)")
print(f"ratio tokens_vs_openssl_limit {cached / limit:.2f} 0.75")
PY

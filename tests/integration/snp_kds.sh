#!/usr/bin/env bash
# Optional AMD KDS fetch (SECLAUNCH_AMD_KDS) against a local HTTP server laid
# out like KDS (/vcek/v1/<product>/<hwid>, /vcek/v1/<product>/cert_chain):
# the VCEK and chain land in the collateral directory and serve later
# verifications without the network; off by default; errors name KDS.
. "$(dirname "$0")/lib.sh"

V=$SL_VECTORS/amd-sev-snp
R=$V/virtee_milan_report.bin # v2: the product is tried (Milan first)
hwid=$(xxd -s 0x1a0 -l 64 -p "$R" | tr -d '\n')
mkdir -p "$T/kds/vcek/v1/Milan" "$T/coll"
cp "$V/virtee_milan_vcek.der" "$T/kds/vcek/v1/Milan/$hwid"
cp "$V/trust/ask_ark_milan.pem" "$T/kds/vcek/v1/Milan/cert_chain"
port=$(free_port)
(cd "$T/kds" && exec python3 -m http.server "$port" --bind 127.0.0.1) >"$T/http.log" 2>&1 &
HTTP_PID=$!
_PIDS+=("$HTTP_PID")
wait_port "$port"

"$SL" evidence import --kind sev-snp --report "$R" -o "$T/ev.json"
check_err "off by default: nothing fetched" 3 "no AMD ARK" "$SL" verify "$T/ev.json" \
	--no-binding --collateral "$T/coll" --at 2024-01-01T00:00:00Z
check "fetched from KDS" 0 env SECLAUNCH_AMD_KDS="http://127.0.0.1:$port" "$SL" verify \
	"$T/ev.json" --no-binding --collateral "$T/coll" --at 2024-01-01T00:00:00Z
assert "KDS got the TCB query" grep -q "GET /vcek/v1/Milan/$hwid?blSPL=3&teeSPL=0&snpSPL=8&ucodeSPL=115" "$T/http.log"
assert "VCEK cached" test -s "$T/coll/kds_vcek_Milan_${hwid:0:16}_7308000000000003.der"
assert "chain cached" test -s "$T/coll/kds_Milan_cert_chain.pem"
stop_pid "$HTTP_PID"
check "served from the cache, KDS down" 0 env SECLAUNCH_AMD_KDS="http://127.0.0.1:$port" \
	"$SL" verify "$T/ev.json" --no-binding --collateral "$T/coll" --at 2024-01-01T00:00:00Z
check "cache used without KDS" 0 "$SL" verify "$T/ev.json" --no-binding \
	--collateral "$T/coll" --at 2024-01-01T00:00:00Z
mkdir -p "$T/coll2"
check_err "KDS unreachable" 3 "AMD KDS" env SECLAUNCH_AMD_KDS="http://127.0.0.1:$port" "$SL" \
	verify "$T/ev.json" --no-binding --collateral "$T/coll2" --at 2024-01-01T00:00:00Z
check_err "plain http to a remote host refused" 1 "https" env \
	SECLAUNCH_AMD_KDS="http://kds.example:80" "$SL" verify "$T/ev.json" --no-binding \
	--collateral "$T/coll2" --at 2024-01-01T00:00:00Z
finish

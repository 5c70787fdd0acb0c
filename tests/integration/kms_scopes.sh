#!/usr/bin/env bash
# Scoped bearer tokens: --dev writes admin.token, wrap.token, operate.token
# and metrics.token (0600); a data owner's wrap token encrypts a dataset
# under a KMS key and reads keys, but cannot delete or rotate a key, revoke
# an AK or issue an enrollment token (403 naming its scope and the one
# needed); operate issues enrollment tokens and lists AKs; metrics reads
# /metrics only; admin does everything; a refused token is audited with
# its scope; a token file shorter than 16 characters is refused by the
# client (one reader, one rule).
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
start_kms "$T/kms" || exit 1
S=$KMS_STATE
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
for s in admin wrap operate metrics; do
	assert "--dev wrote $s.token, mode 0600" test "$(stat -c %a "$S/$s.token")" = 600
done
assert "the four tokens differ" test "$(sort -u "$S"/*.token | wc -l)" -eq 4
check "admin: key create k" 0 "$SL" key create "${K[@]}" --admin-token-file "$S/admin.token" --id k
head -c 4000 /dev/urandom >plain
check "wrap: encrypt under KMS key k" 0 "$SL" encrypt "${K[@]}" --admin-token-file "$S/wrap.token" \
	--key-id k --dataset-id ds-1 plain -o a.sld
check "wrap: key show" 0 "$SL" key show "${K[@]}" --admin-token-file "$S/wrap.token" --id k
check "wrap: key list" 0 "$SL" key list "${K[@]}" --admin-token-file "$S/wrap.token"
check_err "wrap: key delete refused (5), naming both scopes" 5 \
	"this token has scope wrap; POST /v1/keys/\{id\}/delete needs admin" \
	"$SL" key delete "${K[@]}" --admin-token-file "$S/wrap.token" --id k --force
check_err "wrap: key rotate refused" 5 "scope wrap; POST /v1/keys/\{id\}/rotate needs admin" \
	"$SL" key rotate "${K[@]}" --admin-token-file "$S/wrap.token" --id k
check_err "wrap: enrollment token refused" 5 "scope wrap; POST /v1/enroll/tokens needs operate" \
	"$SL" enroll --issue-token "${K[@]}" --admin-token-file "$S/wrap.token"
check_err "wrap: AK revoke refused" 5 "scope wrap; POST /v1/aks/revoke needs operate" \
	"$SL" enroll revoke "${K[@]}" --admin-token-file "$S/wrap.token" 000b0102
check "operate: enrollment token" 0 "$SL" enroll --issue-token "${K[@]}" --admin-token-file "$S/operate.token"
check "operate: AK list" 0 "$SL" enroll list "${K[@]}" --admin-token-file "$S/operate.token"
check_err "operate: key create refused" 5 "scope operate; POST /v1/keys needs admin" \
	"$SL" key create "${K[@]}" --admin-token-file "$S/operate.token" --id k2
check_err "operate: wrap refused" 5 "scope operate; POST /v1/keys/\{id\}/wrap needs wrap" \
	"$SL" encrypt "${K[@]}" --admin-token-file "$S/operate.token" --key-id k --dataset-id ds-2 plain -o b.sld
check_err "metrics: wrap refused" 5 "scope metrics; POST /v1/keys/\{id\}/wrap needs wrap" \
	"$SL" encrypt "${K[@]}" --admin-token-file "$S/metrics.token" --key-id k --dataset-id ds-3 plain -o c.sld
metrics() { # TOKEN_FILE: the status of GET /metrics
	curl -s -o /dev/null -w '%{http_code}' --cacert "$KMS_CA" \
		-H "Authorization: Bearer $(cat "$1")" "$KMS_URL/metrics"
}
assert "metrics: GET /metrics 200" test "$(metrics "$S/metrics.token")" = 200
assert "admin: GET /metrics 200" test "$(metrics "$S/admin.token")" = 200
assert "wrap: GET /metrics 403" test "$(metrics "$S/wrap.token")" = 403
check "admin: key delete" 0 "$SL" key delete "${K[@]}" --admin-token-file "$S/admin.token" --id k --force
assert "a refused scope is audited with the token's scope and the one needed" \
	sh -c "grep '\"event\":\"kms.key.delete\"' '$S/audit.log' | grep '\"decision\":\"deny\"' | grep -q '\"needs\":\"admin\".*\"scope\":\"wrap\"'"
printf 'fifteen-chars-x' >short.token && chmod 600 short.token
check_err "a 15-character token file: refused by the client (2), naming the rule" 2 \
	"short.token: token of 15 characters; a token needs at least 16" \
	"$SL" key list "${K[@]}" --admin-token-file short.token
stop_kms
# one token in two scopes is a configuration error
cp "$S/admin.token" "$T/same.token"
printf '{"wrap_token_file": "%s"}\n' "$T/same.token" >same.json
check_err "the same token for two scopes: seclaunchd refuses to start (2) naming both" 2 \
	'"wrap_token_file" \(.*same.token\) and "admin_token_file" \(.*admin.token\) hold the same token' \
	timeout 20 "$SLD" --dev --state "$S" --listen 127.0.0.1:0 --config "$T/same.json"
finish

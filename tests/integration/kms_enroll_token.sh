#!/usr/bin/env bash
# Enrollment outside --dev: a TPM without an EK certificate the service
# trusts is refused unless it brings a single-use enrollment token an admin
# issued; a token works once, on any replica, and not after it expires; the
# store keeps only its hash; enrollment requests are rate-limited per source.
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
mkdir ekca
printf '{"ek_ca_dir": "%s/ekca", "accept_ek_without_cert": false, "enroll_rate_per_min": 8}' "$T" >prod.json
start_kms "$T/kms" --config "$T/prod.json" || exit 1
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
start_swtpm tpm1
check_err "no EK certificate, no token: refused naming both ways in" 5 \
	"EK certificate that chains to the EK CA is required \(or an enroll_token" "$SL" enroll "${K[@]}"
check_err "issuing a token needs the admin token" 1 "admin-token-file" "$SL" enroll "${K[@]}" --issue-token
head -c 24 /dev/urandom | base64 >wrong.token
chmod 600 wrong.token
check_err "issuing with a wrong admin token: 401" 5 "401|token" "$SL" enroll "${K[@]}" --issue-token --admin-token-file wrong.token
# a bad token request body: 400, the detail naming the field at fault
bad_body() { # body expected-detail
	curl -s --cacert "$KMS_CA" -H "Authorization: Bearer $(cat "$KMS_TOKEN")" -X POST -d "$1" \
		"$KMS_URL/v1/enroll/tokens" >bad.json
	python3 -c 'import json,sys; r=json.load(open("bad.json")); sys.exit(not (r["status"] == 400 and sys.argv[1] in r["detail"]))' "$2"
}
check "token request ttl_s 0: 400" 0 bad_body '{"ttl_s": 0}' "ttl_s: must be an integer from 1 to 604800"
check "token request ttl_s over a week: 400" 0 bad_body '{"ttl_s": 604801}' "ttl_s: must be"
check "token request ttl_s a string: 400" 0 bad_body '{"ttl_s": "60"}' "ttl_s: must be"
check "token request with an unknown field: 400 naming it" 0 bad_body '{"ttl": 60}' 'unknown field "ttl"'
check "token request malformed JSON: 400" 0 bad_body '{"ttl_s": 1' "body: not a JSON object"
check "an admin issues a token" 0 "$SL" enroll "${K[@]}" --issue-token --admin-token-file "$KMS_TOKEN"
cp "$T/out" tok1 && chmod 600 tok1
assert "the token is 43 URL-safe characters" grep -Eqx '[A-Za-z0-9_-]{43}' tok1
assert "the store keeps only its hash" sh -c "! sqlite3 '$KMS_STATE/state.db' .dump | grep -qF \"\$(cat tok1)\""
check "enroll with the token" 0 "$SL" enroll "${K[@]}" --enroll-token-file tok1 -q
assert "the enrollment record says the token vouched" grep -q '"vouched_by":"enroll_token"' "$KMS_STATE/audit.log"
start_swtpm tpm2
check_err "the same token again (another TPM): refused, single use" 5 "already used" \
	"$SL" enroll "${K[@]}" --enroll-token-file tok1
"$SL" enroll "${K[@]}" --issue-token --admin-token-file "$KMS_TOKEN" --ttl 1 >tok2 && chmod 600 tok2
sleep 2.2
check_err "an expired token: refused" 5 "expired" "$SL" enroll "${K[@]}" --enroll-token-file tok2
assert "no pending enrollment is left behind" test "$(sqlite3 "$KMS_STATE/state.db" 'select count(*) from pending')" = 0
# the bucket holds 8 and refills one every 7.5 s: however slowly this
# machine ran the requests above, 16 more in a row exhaust it
limited=0
for i in $(seq 16); do
	if "$SL" enroll "${K[@]}" >/dev/null 2>lim.err; then :; fi
	grep -Eq "429|too many enrollments" lim.err && { limited=$i; break; }
done
assert "enrollment requests are limited per source (429 within 16 more)" test "$limited" -gt 0
check_err "... and the next one is refused too, naming the limit" 5 "429|too many enrollments" "$SL" enroll "${K[@]}"
finish

#!/usr/bin/env bash
# Someone who can write seclaunchd's database but not read the registry key
# cannot enroll anything: a pending enrollment row they insert (their AK,
# the SHA-256 of a credential they chose) does not answer /v1/enroll/activate,
# and an enrollment token row they insert (the hash of a token they chose)
# does not vouch for a TPM, on the SQLite store (sqlite3 on state.db) and on
# the PostgreSQL store (psql); each refusal names the reason and is audited;
# the honest flow (an admin's token, then activation) still enrolls. A
# schema-1 store is upgraded and its unauthenticated rows are dropped.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../testlib/pg.bash"

for tool in swtpm sqlite3 curl python3; do
	command -v "$tool" >/dev/null || { echo "# SKIP: $tool not installed"; exit 77; }
done
cd "$T" || exit 1
mkdir ekca
start_swtpm tpm

# the bytes of the attack: a session, a credential C, an AK name
SESS=$(head -c 16 /dev/urandom | xxd -p | tr -d '\n')
CRED=$(head -c 32 /dev/urandom | xxd -p | tr -d '\n')
CREDH=$(printf '%s' "$CRED" | xxd -r -p | sha256sum | cut -c1-64)
AKN=000b$(head -c 32 /dev/urandom | xxd -p | tr -d '\n')
EKD=$(head -c 32 /dev/urandom | xxd -p | tr -d '\n')
TOK=$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n' | cut -c1-43)
printf '%s' "$TOK" >forged.token && chmod 600 forged.token
TOKH=$(printf '%s' "$TOK" | sha256sum | cut -c1-64)
b64() { printf '%s' "$1" | xxd -r -p | base64 -w0; }
FUTURE=$(($(date +%s) + 600))

# activate SESSION_HEX CRED_HEX: the answer (status and problem) in act.json
activate() {
	curl -s --cacert "$KMS_CA" -X POST \
		-d "{\"session\": \"$(b64 "$1")\", \"secret\": \"$(b64 "$2")\"}" \
		"$KMS_URL/v1/enroll/activate" >act.json
}
refused_forged() { # the activation answer: 403 naming the registry key
	python3 -c 'import json,sys; r=json.load(open("act.json")); sys.exit(not (r.get("status") == 403 and "does not verify under the registry key" in r.get("detail", "")))'
}

# attack NAME SQL-RUNNER HEX-FORMAT: the forged rows through that store
attack() {
	local name=$1 sql=$2 hx=$3
	# the mac column of this release (garbage: the writer lacks the key),
	# left out where the store has none
	if ! $sql "INSERT INTO pending (session, ak_name, ek_sha256, cred_sha256, expires, mac) VALUES ($($hx "$SESS"), $($hx "$AKN"), $($hx "$EKD"), $($hx "$CREDH"), $FUTURE, $($hx "$CRED"))" 2>/dev/null; then
		$sql "INSERT INTO pending (session, ak_name, ek_sha256, cred_sha256, expires) VALUES ($($hx "$SESS"), $($hx "$AKN"), $($hx "$EKD"), $($hx "$CREDH"), $FUTURE)"
	fi
	activate "$SESS" "$CRED"
	assert "$name: a pending row written into the database does not enroll (403 naming the registry key)" refused_forged
	assert "$name: the AK of the forged row is not enrolled" \
		sh -c "! '$SL' enroll list --kms '$KMS_URL' --kms-ca '$KMS_CA' --admin-token-file '$KMS_TOKEN' | grep -q '$AKN'"
	assert "$name: the refusal is audited, naming the reason" \
		sh -c "grep '\"kms.enroll\"' '$KMS_STATE/audit.log' | grep '\"deny\"' | grep -q 'does not verify under the registry key'"
	if ! $sql "INSERT INTO enroll_tokens (hash, expires, used, mac) VALUES ($($hx "$TOKH"), $FUTURE, 0, $($hx "$CREDH"))" 2>/dev/null; then
		$sql "INSERT INTO enroll_tokens (hash, expires, used) VALUES ($($hx "$TOKH"), $FUTURE, 0)"
	fi
	check_err "$name: a token row written into the database does not vouch for a TPM" 5 \
		"does not verify under the registry key" \
		"$SL" enroll --kms "$KMS_URL" --kms-ca "$KMS_CA" --enroll-token-file forged.token
	assert "$name: that refusal is audited too" \
		sh -c "grep '\"kms.enroll\"' '$KMS_STATE/audit.log' | grep '\"deny\"' | grep -q 'enroll_token: its row'"
	check "$name: an admin issues a token" 0 "$SL" enroll --kms "$KMS_URL" --kms-ca "$KMS_CA" --issue-token --admin-token-file "$KMS_TOKEN"
	cp out "$name.token" && chmod 600 "$name.token"
	check "$name: the honest flow enrolls (token, then activation)" 0 \
		"$SL" enroll --kms "$KMS_URL" --kms-ca "$KMS_CA" --enroll-token-file "$name.token" -q
	assert "$name: and the AK is listed enrolled" \
		test "$("$SL" enroll list --kms "$KMS_URL" --kms-ca "$KMS_CA" --admin-token-file "$KMS_TOKEN" | grep -c '  enrolled  ')" -ge 1
}

sq_hex() { printf "X'%s'" "$1"; }
pg_hex() { printf "'\\\\x%s'::bytea" "$1"; }

# ---- SQLite -------------------------------------------------------------------
printf '{"ek_ca_dir": "%s/ekca", "accept_ek_without_cert": false, "enroll_rate_per_min": 0}\n' "$T" >sq.json
start_kms "$T/sq" --config "$T/sq.json" || exit 1
sq_sql() { sqlite3 "$KMS_STATE/state.db" "$1"; }
attack sqlite sq_sql sq_hex
stop_kms

# a schema-1 store: upgraded at start; its pending and token rows (no MAC) go
sqlite3 "$T/sq/state.db" "UPDATE meta SET v = 1 WHERE k = 'schema'; DROP TABLE pending; CREATE TABLE pending (session BLOB PRIMARY KEY, ak_name BLOB NOT NULL, ek_sha256 BLOB NOT NULL, cred_sha256 BLOB NOT NULL, expires INTEGER NOT NULL); INSERT INTO pending VALUES ($(sq_hex "$SESS"), $(sq_hex "$AKN"), $(sq_hex "$EKD"), $(sq_hex "$CREDH"), $FUTURE)"
start_kms "$T/sq" --config "$T/sq.json" || exit 1
assert "schema 1 upgraded to 2, saying its unauthenticated rows are no longer honoured" \
	grep -q "schema 1 upgraded to 2.*no longer honoured" "$KMS_STATE/log"
assert "the upgraded store is schema 2 with no pending row left" \
	test "$(sqlite3 "$KMS_STATE/state.db" "select v from meta where k = 'schema'; select count(*) from pending")" = "$(printf '2\n0')"
activate "$SESS" "$CRED"
assert "the schema-1 pending row answers nothing" \
	python3 -c 'import json,sys; sys.exit(json.load(open("act.json")).get("status") != 403)'
check "the AK enrolled before the upgrade still verifies (enroll list: enrolled)" 0 \
	sh -c "'$SL' enroll list --kms '$KMS_URL' --kms-ca '$KMS_CA' --admin-token-file '$KMS_TOKEN' | grep -q '  enrolled  '"
stop_kms

# ---- PostgreSQL ---------------------------------------------------------------
if pg_bin >/dev/null; then
	start_pg || exit 1
	start_swtpm tpm2
	printf '{"store": "%s", "ek_ca_dir": "%s/ekca", "accept_ek_without_cert": false, "enroll_rate_per_min": 0}\n' "$PG_URI" "$T" >pg.json
	start_kms "$T/pg-kms" --config "$T/pg.json" || exit 1
	pg_sql() { $PSQL -c "$1"; }
	attack postgresql pg_sql pg_hex
	stop_kms
else
	skip "PostgreSQL store" "PostgreSQL server binaries not installed"
fi
finish

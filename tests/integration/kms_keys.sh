#!/usr/bin/env bash
# The key lifecycle: list and show, rotation (new wraps use the new version,
# old ones still unwrap until retired), rewrap of a sharded dataset to the
# newest version through the KMS (only the manifest's key reference
# changes: shards and root stay), retire and delete refused while a dataset
# references them unless --force, disable stopping releases at once, every
# change audited, the admin token required.
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
start_swtpm tpm
start_kms "$T/kms" || exit 1
A=(--kms "$KMS_URL" --kms-ca "$KMS_CA" --admin-token-file "$KMS_TOKEN")
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "enroll" 0 "$SL" enroll "${K[@]}" -q
check "key create" 0 "$SL" key create "${A[@]}" --id k
mkdir src && head -c 300000 /dev/urandom >src/a.bin && head -c 1000 /dev/urandom >src/b.txt
check "encrypt a sharded dataset under k (version 1)" 0 "$SL" encrypt "${A[@]}" --key-id k \
	--dataset-id sharded-1 --sharded src -o ds
head -c 5000 /dev/urandom >one
check "encrypt a single SLD file under k (version 1)" 0 "$SL" encrypt "${A[@]}" --key-id k \
	--dataset-id single-1 one -o one.sld
check "key list" 0 "$SL" key list "${A[@]}" --json
assert "list names k at version 1 with two references" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); k=[x for x in d["keys"] if x["id"]=="k"][0]
sys.exit(0 if k["current_version"]==1 and k["references"]==2 and k["state"]=="enabled" else 1)' "$T/out"
head -c 32 /dev/urandom | base64 >wrong.token
chmod 600 wrong.token
check_err "key list with a wrong admin token: refused (5, 401)" 5 "401|token" \
	"$SL" key list "${K[@]}" --admin-token-file wrong.token
check_err "show of an unknown key: 404" 5 "404|unknown key" "$SL" key show "${A[@]}" --id nope

check "rotate: version 2" 0 "$SL" key rotate "${A[@]}" --id k
assert "rotate says version 2" grep -q "version 2 is current" "$T/out"
man_before=$(sha256sum ds/manifest.sldm | cut -c1-64)
shards_before=$(cat ds/shard-* | sha256sum)
check "inspect before the rewrap" 0 "$SL" inspect ds
root_before=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["root"])' "$T/out" 2>/dev/null)
check "rewrap the sharded dataset" 0 "$SL" rewrap ds --admin-token-file "$KMS_TOKEN" --kms-ca "$KMS_CA"
assert "rewrap says 1 -> 2" grep -q "version 1 -> 2" "$T/out"
assert "the manifest changed" test "$(sha256sum ds/manifest.sldm | cut -c1-64)" != "$man_before"
assert "no shard changed" test "$(cat ds/shard-* | sha256sum)" = "$shards_before"
check "inspect after the rewrap" 0 "$SL" inspect ds
root_after=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["root"])' "$T/out" 2>/dev/null)
assert "the dataset root is unchanged" test -n "$root_before" -a "$root_before" = "$root_after"
check "the rewrapped dataset decrypts" 0 "$SL" decrypt "${K[@]}" ds -o out1
assert "its files round-trip" cmp -s src/a.bin out1/a.bin
check "the single file (version 1) still decrypts" 0 "$SL" decrypt "${K[@]}" one.sld -o one.1
check_err "rewrap of a single SLD file: refused, naming why (2)" 2 "only a sharded dataset can be rewrapped" \
	"$SL" rewrap one.sld --admin-token-file "$KMS_TOKEN" --kms-ca "$KMS_CA"

check_err "retire while the single file references version 1: refused (409)" 5 "409|reference" \
	"$SL" key retire "${A[@]}" --id k
check "retire --force" 0 "$SL" key retire "${A[@]}" --id k --force
check_err "a retired version no longer unwraps" 4 "retired" "$SL" decrypt "${K[@]}" one.sld -o one.2
check "the rewrapped dataset still decrypts" 0 "$SL" decrypt "${K[@]}" ds -o out2

check "disable" 0 "$SL" key disable "${A[@]}" --id k
check_err "a disabled key releases nothing (4, key_disabled)" 4 "key_disabled" "$SL" decrypt "${K[@]}" ds -o out3
assert "no output from a refused release" test ! -e out3
check_err "a disabled key wraps nothing (409)" 5 "409|disabled" "$SL" encrypt "${A[@]}" --key-id k \
	--dataset-id single-2 one -o two.sld
check "enable" 0 "$SL" key enable "${A[@]}" --id k
check "enabled again: releases" 0 "$SL" decrypt "${K[@]}" ds -o out4

check_err "delete while referenced: refused (409)" 5 "409|reference" "$SL" key delete "${A[@]}" --id k
check "key create k2, never used" 0 "$SL" key create "${A[@]}" --id k2
check "delete of an unreferenced key" 0 "$SL" key delete "${A[@]}" --id k2
check "delete --force" 0 "$SL" key delete "${A[@]}" --id k --force
check_err "a deleted key releases nothing (key_unknown)" 4 "key_unknown" "$SL" decrypt "${K[@]}" ds -o out5
for ev in rotate rewrap retire disable enable delete; do
	assert "audited: kms.key.$ev" grep -q "\"event\":\"kms.key.$ev\"" "$KMS_STATE/audit.log"
done
assert "the refused delete is audited as a denial" sh -c "grep '\"event\":\"kms.key.delete\"' '$KMS_STATE/audit.log' | grep -q '\"decision\":\"deny\"'"
finish

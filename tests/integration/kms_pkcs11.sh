#!/usr/bin/env bash
# seclaunchd with its KEKs on a PKCS#11 token (SoftHSM2, token in a temp
# dir via SOFTHSM2_CONF): the full path enroll -> key create -> encrypt ->
# attested release -> decrypt; the KEK is a sensitive, non-extractable
# AES-256 object; tamper and key-substitution refusals; a restart keeps keys;
# a wrong PIN or token label stops the service from starting.
. "$(dirname "$0")/lib.sh"

MODULE=/usr/lib/softhsm/libsofthsm2.so
if [ ! -e "$MODULE" ] || ! command -v softhsm2-util >/dev/null; then
	skip "pkcs11 backend" "SoftHSM2 ($MODULE, softhsm2-util) is not installed"
	finish
fi
cd "$T" || exit 1
build_probe || exit 1
mkdir tokens
printf 'directories.tokendir = %s/tokens\nobjectstore.backend = file\nlog.level = ERROR\n' "$T" >softhsm2.conf
export SOFTHSM2_CONF=$T/softhsm2.conf
check "init the token" 0 softhsm2-util --init-token --free --label seclaunch --pin 246810 --so-pin 13579
printf '246810\n' >pin
chmod 600 pin
cat >p11.json <<EOJ
{"kek_backend": "pkcs11", "pkcs11_module": "$MODULE",
 "pkcs11_token_label": "seclaunch", "pkcs11_pin_file": "$T/pin"}
EOJ
start_swtpm tpm
start_kms "$T/kms" --config "$T/p11.json" || exit 1
export SECLAUNCH_KMS_CA=$KMS_CA
head -c 2000000 /dev/urandom >plain

check "health says pkcs11" 0 curl -sf --cacert "$KMS_CA" "$KMS_URL/v1/health"
assert "backend is pkcs11" grep -q '"kek_backend":"pkcs11"' "$T/out"
assert "no local keystore or master key was made" test ! -e "$KMS_STATE/keystore" -a ! -e "$KMS_STATE/master.key"
check "enroll" 0 "$SL" enroll --kms "$KMS_URL" -q
check "key create (on the token)" 0 "$SL" key create --kms "$KMS_URL" --admin-token-file "$KMS_TOKEN" --id hsm1
check_err "key create of an existing id: 409" 5 "409" \
	"$SL" key create --kms "$KMS_URL" --admin-token-file "$KMS_TOKEN" --id hsm1
check "encrypt --kms (wrapped by the token)" 0 "$SL" encrypt --kms "$KMS_URL" --key-id hsm1 \
	--admin-token-file "$KMS_TOKEN" --dataset-id hsm-ds plain -o a.sld
check "decrypt --kms (unwrapped on the token, attested release)" 0 "$SL" decrypt --kms "$KMS_URL" a.sld -o dec.bin
assert "round trip" cmp -s plain dec.bin
W=$(wrapped_of a.sld)
check_err "bit-flipped wrapped DEK: refused" 4 "\[unwrap_failed\].*'hsm1'" \
	"$PROBE" "$KMS_URL" "$KMS_CA" release hsm1 hsm-ds "$W" flip
check_err "dataset A's wrapped DEK as dataset B: refused" 4 "\[unwrap_failed\].*dataset 'other'" \
	"$PROBE" "$KMS_URL" "$KMS_CA" release hsm1 hsm-ds "$W" dataset:other
check_err "unknown key: refused" 4 "\[key_unknown\]" "$PROBE" "$KMS_URL" "$KMS_CA" release nokey hsm-ds "$W"

# the object on the token: AES, 32 bytes, sensitive, never extractable
pkcs11-tool --module "$MODULE" --token-label seclaunch --login --pin 246810 --list-objects --type secrkey >objs.txt 2>&1
assert "the KEK is on the token, labelled with the key id" grep -q 'label: *hsm1' objs.txt
assert "it is an AES key" grep -Eq 'Secret Key Object; AES' objs.txt
assert "it is sensitive" grep -Eiq 'Access: *.*sensitive' objs.txt
assert "it is never extractable" grep -Eiq 'never extractable' objs.txt
if pkcs11-tool --module "$MODULE" --token-label seclaunch --login --pin 246810 --read-object --type secrkey --label hsm1 -o kek.bin >read.txt 2>&1; then
	assert "reading the KEK's value is refused by the token" false
else
	assert "reading the KEK's value is refused by the token" test ! -s kek.bin
fi

stop_pid "$KMS_PID"
start_kms "$T/kms" --config "$T/p11.json" || exit 1
check "after a restart the token key still releases" 0 "$SL" decrypt --kms "$KMS_URL" a.sld -o dec2.bin
# KEK versions on the token: rotation makes the object "hsm1#2"; new wraps
# use it, the version-1 dataset still opens, a rewrap moves a sharded one
check "rotate the token key" 0 "$SL" key rotate --kms "$KMS_URL" --admin-token-file "$KMS_TOKEN" --id hsm1
check "encrypt under version 2" 0 "$SL" encrypt --kms "$KMS_URL" --key-id hsm1 \
	--admin-token-file "$KMS_TOKEN" --dataset-id hsm-ds2 plain -o b.sld
assert "the new wrap names version 2" test "$("$SL" inspect b.sld | python3 -c 'import base64,json,sys; print(base64.b64decode(json.load(sys.stdin)["key"]["wrapped_dek"])[0])')" = 2
check "version 2 releases" 0 "$SL" decrypt --kms "$KMS_URL" b.sld -o dec3.bin
check "version 1 still releases" 0 "$SL" decrypt --kms "$KMS_URL" a.sld -o dec4.bin
pkcs11-tool --module "$MODULE" --token-label seclaunch --login --pin 246810 --list-objects --type secrkey >objs2.txt 2>&1
assert "version 2 is its own object on the token" grep -q 'label: *hsm1#2' objs2.txt
stop_pid "$KMS_PID"
printf '000000\n' >badpin
chmod 600 badpin
sed "s|$T/pin|$T/badpin|" p11.json >badpin.json
check_err "wrong PIN: refuses to start naming the token" 7 "C_Login to token 'seclaunch'" \
	timeout 20 "$SLD" --dev --state "$T/kms" --config "$T/badpin.json"
sed 's|"seclaunch"|"nosuchtoken"|' p11.json >badlabel.json
check_err "unknown token label: refuses to start" 7 "no token labelled 'nosuchtoken'" \
	timeout 20 "$SLD" --dev --state "$T/kms" --config "$T/badlabel.json"
finish

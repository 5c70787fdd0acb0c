#!/usr/bin/env bash
# seclaunchd with its KEKs in AWS KMS (kek_backend "aws-kms"), against moto's
# server on loopback: key create makes an AWS key (boto3 lists it); a dataset
# encrypted under it is released through an attested decrypt; its wrapped DEK
# does not decrypt, on the AWS side, under another encryption context; an
# existing AWS key is adopted with --aws-key-id; disable refuses releases,
# enable restores them; an http:// endpoint that is not loopback is refused
# at start. Skips (77) when moto_server is not installed.
. "$(dirname "$0")/lib.sh"

if ! command -v moto_server >/dev/null || ! python3 -c 'import boto3' 2>/dev/null; then
	echo "SKIP: kms_aws: moto_server (moto 5) and boto3 are not installed"
	exit 77
fi
cd "$T" || exit 1
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export AWS_ACCESS_KEY_ID=AKIDSECLAUNCHTEST1 AWS_SECRET_ACCESS_KEY=seclaunch-test-secret-4f9a1c2e7b AWS_DEFAULT_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_PROFILE
moto_server -H 127.0.0.1 -p "$PORT" >moto.log 2>&1 &
MOTO_PID=$!
trap 'kill $MOTO_PID 2>/dev/null' EXIT
for _ in $(seq 50); do
	curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break
	sleep 0.2
done
EP=http://127.0.0.1:$PORT
aws_py() { python3 -c "import boto3,sys,base64,json
k=boto3.client('kms',endpoint_url='$EP',region_name='us-east-1')
$1" "${@:2}"; }

cat >aws.json <<EOJ
{"kek_backend": "aws-kms", "aws_region": "us-east-1", "aws_kms_endpoint": "$EP/"}
EOJ
start_swtpm tpm
start_kms "$T/kms" --config "$T/aws.json" || exit 1
A=(--kms "$KMS_URL" --kms-ca "$KMS_CA" --admin-token-file "$KMS_TOKEN")
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "enroll" 0 "$SL" enroll "${K[@]}" -q
check "key create (a new AWS KMS key)" 0 "$SL" key create "${A[@]}" --id awsk
check "key show" 0 "$SL" key show "${A[@]}" --id awsk --json
assert "the key's backend is aws-kms" grep -q '"aws-kms"' "$T/out"
assert "boto3 lists one key tagged seclaunch:key_id=awsk" aws_py '
ks=[m["KeyId"] for m in k.list_keys()["Keys"]]
t=[x for x in ks if {"TagKey":"seclaunch:key_id","TagValue":"awsk"} in k.list_resource_tags(KeyId=x).get("Tags",[])]
sys.exit(0 if len(t)==1 else 1)'
head -c 200000 /dev/urandom >plain
check "encrypt under the AWS KMS key" 0 "$SL" encrypt "${A[@]}" --key-id awsk --dataset-id ds-aws plain -o a.sld
check "decrypt through an attested release" 0 "$SL" decrypt "${K[@]}" a.sld -o a.out
assert "round trip" cmp -s plain a.out
check "inspect the wrapped DEK" 0 "$SL" inspect a.sld --json
python3 -c 'import json,sys,base64
d=json.load(open(sys.argv[1]))
w=d.get("wrapped_dek") or d.get("key",{}).get("wrapped_dek")
open(sys.argv[2],"wb").write(base64.b64decode(w))' "$T/out" wrapped.bin 2>/dev/null
assert "the wrapped DEK is version 1, AWS marker, then AWS's blob" python3 -c '
import sys; b=open("wrapped.bin","rb").read(); sys.exit(0 if len(b)>20 and b[0]==1 and b[1]==0xA5 else 1)'
assert "AWS opens the blob under its own context (the DEK is 32 bytes)" aws_py '
b=open("wrapped.bin","rb").read()[2:]
r=k.decrypt(CiphertextBlob=b,EncryptionContext={"seclaunch:key_id":"awsk","seclaunch:dataset_id":"ds-aws"})
sys.exit(0 if len(r["Plaintext"])==32 else 1)'
assert "AWS refuses it under another dataset's context" aws_py '
b=open("wrapped.bin","rb").read()[2:]
try:
    k.decrypt(CiphertextBlob=b,EncryptionContext={"seclaunch:key_id":"awsk","seclaunch:dataset_id":"ds-other"})
except Exception as e:
    sys.exit(0 if "InvalidCiphertext" in str(e) else 2)
sys.exit(1)'
assert "AWS refuses it with no context" aws_py '
b=open("wrapped.bin","rb").read()[2:]
try:
    k.decrypt(CiphertextBlob=b)
except Exception as e:
    sys.exit(0 if "InvalidCiphertext" in str(e) else 2)
sys.exit(1)'

ARN=$(aws_py 'print(k.create_key(KeySpec="SYMMETRIC_DEFAULT",KeyUsage="ENCRYPT_DECRYPT")["KeyMetadata"]["Arn"])')
check "adopt an existing AWS key with --aws-key-id" 0 "$SL" key create "${A[@]}" --id adopted --aws-key-id "$ARN"
check "encrypt under the adopted key" 0 "$SL" encrypt "${A[@]}" --key-id adopted --dataset-id ds-adopted plain -o b.sld
check "decrypt under the adopted key" 0 "$SL" decrypt "${K[@]}" b.sld -o b.out
assert "round trip (adopted)" cmp -s plain b.out
check_err "adopting an AWS key that does not exist: refused (404/400)" 5 "no such key|NotFound|400|404" \
	"$SL" key create "${A[@]}" --id ghost --aws-key-id "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-0000-0000-000000000000"

check "disable" 0 "$SL" key disable "${A[@]}" --id awsk
assert "the AWS key is disabled too" aws_py '
ks=[m["KeyId"] for m in k.list_keys()["Keys"]]
t=[x for x in ks if {"TagKey":"seclaunch:key_id","TagValue":"awsk"} in k.list_resource_tags(KeyId=x).get("Tags",[])]
sys.exit(0 if k.describe_key(KeyId=t[0])["KeyMetadata"]["KeyState"]=="Disabled" else 1)'
check_err "a disabled key releases nothing (4, key_disabled)" 4 "key_disabled" "$SL" decrypt "${K[@]}" a.sld -o a.out2
check "enable" 0 "$SL" key enable "${A[@]}" --id awsk
check "enabled again: releases" 0 "$SL" decrypt "${K[@]}" a.sld -o a.out3
assert "round trip after enable" cmp -s plain a.out3

check "key delete of the adopted key --force" 0 "$SL" key delete "${A[@]}" --id adopted --force
assert "its AWS key is scheduled for deletion (7 days)" aws_py '
sys.exit(0 if k.describe_key(KeyId=sys.argv[1])["KeyMetadata"]["KeyState"]=="PendingDeletion" else 1)' "$ARN"

# the secret access key: in the key process (which signs), never in the
# network-facing one (its environment copy is wiped after the fork)
cat >scan.py <<'EOP'
import re, sys
pid, needle = int(sys.argv[1]), sys.argv[2].encode()
with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
    for line in maps:
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+)", line)
        lo, hi = int(m.group(1), 16), int(m.group(2), 16)
        if m.group(3)[0] != "r" or "[vvar]" in line or "[vsyscall]" in line:
            continue
        try:
            mem.seek(lo)
            if needle in mem.read(hi - lo):
                sys.exit(0)
        except OSError:
            pass
sys.exit(1)
EOP
KPID=$(for c in $(cat /proc/"$KMS_PID"/task/*/children 2>/dev/null); do
	for g in $(cat /proc/"$c"/task/*/children 2>/dev/null); do
		[ "$(cat /proc/"$g"/comm 2>/dev/null)" = seclaunchd-kek ] && echo "$g"
	done
done | head -n1)
if [ -n "${ASAN_OPTIONS:-}" ]; then
	# AddressSanitizer's shadow and allocator regions span terabytes of mappings
	echo "note: memory scan skipped (an AddressSanitizer build)"
elif [ "$(id -u)" = 0 ] && [ -n "$KPID" ]; then
	assert "the key process holds the secret access key (the scan works)" \
		python3 scan.py "$KPID" "$AWS_SECRET_ACCESS_KEY"
	assert "the network process does not" sh -c "! python3 scan.py $KMS_PID '$AWS_SECRET_ACCESS_KEY'"
else
	echo "note: memory scan skipped (needs root and the key process)"
fi
stop_pid "$KMS_PID"

cat >bad.json <<EOJ
{"kek_backend": "aws-kms", "aws_region": "us-east-1", "aws_kms_endpoint": "http://10.1.2.3:4566/"}
EOJ
check_err "http:// endpoint not on loopback: refused at start" 2 "http:// is allowed only on a loopback" \
	timeout 20 "$SLD" --dev --state "$T/kms" --config "$T/bad.json"
finish

#!/usr/bin/env bash
# Policy signatures interoperate with the stock minisign tool in both
# directions; every tamper case is refused with exit 4 (signature) or 2
# (malformed), and `policy explain` gives allow (0) / deny (4) with reasons.
. "$(dirname "$0")/lib.sh"

if ! command -v minisign >/dev/null; then
	skip "minisign interop" "the minisign tool is not installed"
	finish
fi

cd "$T" || exit 1
cat >policy.json <<'EOF'
{"version": 1,
 "datasets": [
  {"id": "clinical-*", "classification": "restricted",
   "allowed_regions": ["eu"], "denied_regions": ["gcp:europe-west3"],
   "tee_kinds": ["sev-snp", "tdx"], "require_gpu_cc": true, "key_ttl": 600,
   "output_destinations": [{"url": "s3://ckpt-eu/*", "region": "aws:eu-west-1"}]}
 ],
 "keys": {"k-clinical": ["clinical-*"]}}
EOF

# --- seclaunch keys, seclaunch signature -> minisign verifies
check "keygen -W" 0 "$SL" policy keygen --secret-key sl.key --public-key sl.pub -W
assert "secret key is mode 0600" test "$(stat -c %a sl.key)" = 600
check_err "keygen refuses to overwrite" 2 "exists" \
	"$SL" policy keygen --secret-key sl.key --public-key sl.pub -W
check "sign" 0 "$SL" policy sign --secret-key sl.key --policy policy.json -t "approved by compliance"
assert "signature written as P.minisig" test -s policy.json.minisig
check "minisign -V verifies seclaunch's signature" 0 minisign -V -p sl.pub -m policy.json
assert "minisign shows the trusted comment" grep -q "approved by compliance" "$T/out"
check "seclaunch verifies its own signature" 0 "$SL" policy verify --policy policy.json --policy-pubkey sl.pub
assert "verify shows the trusted comment" grep -q "Trusted comment: approved by compliance" "$T/out"
check "legacy sign" 0 "$SL" policy sign --secret-key sl.key --policy policy.json --legacy --signature legacy.sig
check "minisign -V verifies a legacy (Ed) signature from seclaunch" 0 minisign -V -p sl.pub -m policy.json -x legacy.sig
check_err "minisign -H refuses the legacy one (it is not prehashed)" 1 "" minisign -V -H -p sl.pub -m policy.json -x legacy.sig

# --- minisign keys and signatures -> seclaunch verifies
check "minisign -G -W" 0 minisign -G -W -p mini.pub -s mini.key
check "minisign -S" 0 minisign -S -s mini.key -m policy.json -x mini.sig -t "signed with minisign"
check "seclaunch verifies minisign's signature" 0 \
	"$SL" policy verify --policy policy.json --policy-pubkey mini.pub --signature mini.sig
assert "trusted comment shown" grep -q "signed with minisign" "$T/out"
LONG=$(python3 -c 'print("x" * 4000)')
check "minisign -S with a 4000-byte trusted comment" 0 minisign -S -s mini.key -m policy.json -x long.sig -t "$LONG"
check "seclaunch verifies it" 0 \
	"$SL" policy verify --policy policy.json --policy-pubkey mini.pub --signature long.sig
check "minisign -S -l (legacy)" 0 minisign -S -l -s mini.key -m policy.json -x mini-legacy.sig
check "seclaunch verifies minisign's legacy signature" 0 \
	"$SL" policy verify --policy policy.json --policy-pubkey mini.pub --signature mini-legacy.sig
check "seclaunch signs with minisign's secret key" 0 \
	"$SL" policy sign --secret-key mini.key --policy policy.json --signature sl-by-mini.sig
check "minisign verifies it" 0 minisign -V -p mini.pub -m policy.json -x sl-by-mini.sig

# --- tamper: policy, signature, trusted comment, key
cp policy.json tampered.json
sed -i 's/"key_ttl": 600/"key_ttl": 601/' tampered.json
check_err "flipped byte in the policy" 4 "signature does not verify" \
	"$SL" policy verify --policy tampered.json --policy-pubkey sl.pub --signature policy.json.minisig
check "minisign agrees" 1 minisign -V -p sl.pub -m tampered.json -x policy.json.minisig

# flip one character inside the base64 signature (line 2)
awk 'NR==2 { c = substr($0, 20, 1); r = (c == "A") ? "B" : "A"; $0 = substr($0, 1, 19) r substr($0, 21) } { print }' \
	policy.json.minisig >badsig.minisig
check_err "flipped byte in the signature" 4 "signature does not verify" \
	"$SL" policy verify --policy policy.json --policy-pubkey sl.pub --signature badsig.minisig
sed 's/^trusted comment: approved by compliance$/trusted comment: approved by nobody/' \
	policy.json.minisig >badtc.minisig
check_err "changed trusted comment" 4 "trusted comment signature does not verify" \
	"$SL" policy verify --policy policy.json --policy-pubkey sl.pub --signature badtc.minisig
check "minisign agrees on the comment" 1 minisign -V -p sl.pub -m policy.json -x badtc.minisig
check_err "wrong public key" 4 "wrong public key" \
	"$SL" policy verify --policy policy.json --policy-pubkey mini.pub
printf 'untrusted comment: x\nnot base64!\n' >junk.minisig
check_err "malformed signature file" 2 "line 2" \
	"$SL" policy verify --policy policy.json --policy-pubkey sl.pub --signature junk.minisig
printf 'garbage\n' >junk.pub
check_err "malformed public key" 2 "junk.pub: minisign public key" \
	"$SL" policy verify --policy policy.json --policy-pubkey junk.pub
check_err "missing signature file" 2 "policy.json.none" \
	"$SL" policy verify --policy policy.json --policy-pubkey sl.pub --signature policy.json.none

# --- an invalid document: check names the path; sign refuses it
printf '{"version": 1, "datasets": [{"id": "x", "allowed_regions": ["aws:eu-*x"], "tee_kinds": ["tdx"]}]}' >bad.json
check_err "check names the JSON path" 2 '\$\.datasets\[0\]\.allowed_regions\[0\]: pattern .aws:eu-\*x. matches no known region' \
	"$SL" policy check --policy bad.json
check_err "sign refuses an invalid policy" 2 "not signing an invalid policy" \
	"$SL" policy sign --secret-key sl.key --policy bad.json
check "check accepts the good one" 0 "$SL" policy check --policy policy.json
check_err "usage error" 1 "needs --policy" "$SL" policy check

# --- explain: same evaluation as seclaunchd, exit 0 / 4
cat >claims-ok.json <<'EOF'
{"binding": "verified", "tee.kind": "sev-snp", "snp.policy.debug": "false", "gpu.cc": "on",
 "cloud.provider": "gcp", "cloud.region": "europe-west4", "cloud.region_verified": "true",
 "cloud.identity_fresh": "true"}
EOF
check "explain allows" 0 "$SL" policy explain --policy policy.json --policy-pubkey sl.pub \
	--claims claims-ok.json --dataset clinical-7 --key k-clinical --destination s3://ckpt-eu/run1
assert "explain says ALLOW" grep -q "decision: ALLOW" "$T/out"
sed 's/europe-west4/europe-west3/' claims-ok.json >claims-denied.json
check "explain denies (exit 4)" 4 "$SL" policy explain --policy policy.json --policy-pubkey sl.pub \
	--claims claims-denied.json --dataset clinical-7 --json
assert "reason names the denied_regions rule" grep -q '\$.datasets\[0\].denied_regions\[0\]: region gcp:europe-west3 is denied' "$T/out"
assert "json decision is deny" grep -q '"decision": "deny"' "$T/out"
check "explain: key for another dataset" 4 "$SL" policy explain --policy policy.json --policy-pubkey sl.pub \
	--claims claims-ok.json --dataset public-1 --key k-clinical
assert "reason names the keys rule" grep -q "key 'k-clinical' may not serve dataset 'public-1'" "$T/out"
check_err "explain on a tampered policy never evaluates" 4 "signature does not verify" \
	"$SL" policy explain --policy tampered.json --policy-pubkey sl.pub --signature policy.json.minisig \
	--claims claims-ok.json --dataset clinical-7
printf '{"a": 1}' >claims-bad.json
check_err "claims file with a non-string value" 2 "claims-bad.json" \
	"$SL" policy explain --policy policy.json --policy-pubkey sl.pub --claims claims-bad.json --dataset clinical-7

# --- password-encrypted secret keys (scrypt), both directions. minisign reads
# the password on stdin; seclaunch from SECLAUNCH_POLICY_PASSWORD_FILE.
printf 'pw-for-test\npw-for-test\n' | minisign -G -p menc.pub -s menc.key >/dev/null 2>&1
printf 'pw-for-test\n' >pw.txt
chmod 600 pw.txt
check "seclaunch signs with minisign's encrypted key" 0 env SECLAUNCH_POLICY_PASSWORD_FILE=pw.txt \
	"$SL" policy sign --secret-key menc.key --policy policy.json --signature enc.sig
check "minisign verifies it" 0 minisign -V -p menc.pub -m policy.json -x enc.sig
printf 'wrong\n' >pw-bad.txt
chmod 600 pw-bad.txt
check_err "wrong password" 6 "wrong password" env SECLAUNCH_POLICY_PASSWORD_FILE=pw-bad.txt \
	"$SL" policy sign --secret-key menc.key --policy policy.json --signature enc2.sig
check_err "no password source and no terminal" 1 "SECLAUNCH_POLICY_PASSWORD_FILE" \
	setsid "$SL" policy sign --secret-key menc.key --policy policy.json --signature enc3.sig

finish

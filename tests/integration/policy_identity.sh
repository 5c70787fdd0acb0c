#!/usr/bin/env bash
# Region evidence: GCP-style JWTs and AWS-style PKCS7 documents signed by
# test keys made here with openssl (accepted; wrong signer, expired, wrong
# audience, alg none, unknown kid refused), the real AWS vectors, a region
# the policy denies, and collection from a loopback metadata server.
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
openssl genrsa -out k1.pem 2048 2>/dev/null
openssl genrsa -out k2.pem 2048 2>/dev/null
BINDING=$(python3 -c 'print("ab" * 32)')
NOW=$(date +%s)

# JWKS with k1 under kid "k1"
python3 - k1.pem >jwks.json <<'EOF'
import base64, json, subprocess, sys
mod = subprocess.run(["openssl", "rsa", "-in", sys.argv[1], "-noout", "-modulus"],
                     capture_output=True, text=True, check=True).stdout.strip().split("=")[1]
b = lambda x: base64.urlsafe_b64encode(x).rstrip(b"=").decode()
print(json.dumps({"keys": [{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "k1",
                            "n": b(bytes.fromhex(mod)), "e": b((65537).to_bytes(3, "big"))}]}))
EOF

# mkjwt KEY HEADER_JSON PAYLOAD_JSON > token   (KEY "-" leaves it unsigned)
mkjwt() {
	local h p
	h=$(printf '%s' "$2" | basenc --base64url -w0 | tr -d '=')
	p=$(printf '%s' "$3" | basenc --base64url -w0 | tr -d '=')
	if [ "$1" = - ]; then
		printf '%s.%s.' "$h" "$p"
	else
		printf '%s.%s' "$h" "$p" >signing.txt
		printf '%s.%s.%s' "$h" "$p" "$(openssl dgst -sha256 -sign "$1" signing.txt | basenc --base64url -w0 | tr -d '=')"
	fi
}
payload() { # zone aud iat exp
	printf '{"iss":"https://accounts.google.com","aud":"%s","iat":%s,"exp":%s,"google":{"compute_engine":{"project_id":"p1","project_number":42,"zone":"%s","instance_id":"9","instance_name":"vm"}}}' \
		"$2" "$3" "$4" "$1"
}
H='{"alg":"RS256","kid":"k1","typ":"JWT"}'
mkjwt k1.pem "$H" "$(payload europe-west4-a "$BINDING" $((NOW - 5)) $((NOW + 3595)))" >good.jwt
mkjwt k1.pem "$H" "$(payload us-central1-a "$BINDING" $((NOW - 5)) $((NOW + 3595)))" >us.jwt
mkjwt k2.pem "$H" "$(payload europe-west4-a "$BINDING" $((NOW - 5)) $((NOW + 3595)))" >wrongsigner.jwt
mkjwt k1.pem "$H" "$(payload europe-west4-a "$BINDING" $((NOW - 7200)) $((NOW - 3600)))" >expired.jwt
mkjwt k1.pem "$H" "$(payload europe-west4-a https://example.com $((NOW - 5)) $((NOW + 3595)))" >aud.jwt
mkjwt - '{"alg":"none","kid":"k1"}' "$(payload europe-west4-a "$BINDING" $((NOW - 5)) $((NOW + 3595)))" >none.jwt
mkjwt k1.pem '{"alg":"RS256","kid":"k7"}' "$(payload europe-west4-a "$BINDING" $((NOW - 5)) $((NOW + 3595)))" >kid.jwt

IV=("$SL" policy identity-verify --gcp-jwks jwks.json --binding "$BINDING")
check "GCP JWT signed by the test key is accepted" 0 "${IV[@]}" --identity good.jwt
assert "region from the zone" grep -qx "cloud.region=europe-west4" "$T/out"
assert "fresh (aud is the binding)" grep -qx "cloud.identity_fresh=true" "$T/out"
assert "verified" grep -qx "cloud.region_verified=true" "$T/out"
check_err "wrong signer" 3 "signature does not verify" "${IV[@]}" --identity wrongsigner.jwt
check_err "expired" 3 "expired at" "${IV[@]}" --identity expired.jwt
check_err "wrong audience" 3 "wrong audience" "${IV[@]}" --identity aud.jwt
check_err "alg none" 3 "alg 'none' refused" "${IV[@]}" --identity none.jwt
check_err "kid not in the JWKS" 3 "key id 'k7' is not in the JWKS" "${IV[@]}" --identity kid.jwt
check_err "no JWKS given" 1 "no JWKS" "$SL" policy identity-verify --identity good.jwt

# --- AWS-style PKCS7 with a test certificate
openssl req -x509 -new -key k1.pem -subj /CN=aws-test -days 30 -out aws1.pem 2>/dev/null
openssl req -x509 -new -key k2.pem -subj /CN=aws-other -days 30 -out aws2.pem 2>/dev/null
mkdir trust1 trust2
cp aws1.pem trust1/
cp aws2.pem trust2/
printf '{\n  "accountId" : "111122223333",\n  "availabilityZone" : "eu-west-1b",\n  "instanceId" : "i-0abc",\n  "pendingTime" : "2026-11-01T10:00:00Z",\n  "region" : "eu-west-1"\n}' >doc.json
openssl smime -sign -binary -nodetach -nocerts -in doc.json -signer aws1.pem -inkey k1.pem \
	-outform DER -out doc.p7
python3 - <<'EOF' >aws-iid.json
import base64, json
print(json.dumps({"kind": "aws-iid", "document": open("doc.json").read(),
                  "pkcs7": base64.encodebytes(open("doc.p7", "rb").read()).decode()}))
EOF
check "AWS PKCS7 signed by the test certificate is accepted" 0 \
	"$SL" policy identity-verify --identity aws-iid.json --aws-trust trust1
assert "AWS region" grep -qx "cloud.region=eu-west-1" "$T/out"
assert "AWS documents are never fresh" grep -qx "cloud.identity_fresh=false" "$T/out"
check_err "AWS wrong signer" 3 "wrong signer" \
	"$SL" policy identity-verify --identity aws-iid.json --aws-trust trust2

# --- the real AWS vectors (pinned time; AWS does not date-check its certificates)
V=$SL_VECTORS/aws-iid
mkdir dsa rsa
cp "$V/aws_dsa_iid_cert.pem" dsa/
cp "$V/aws_rsa_iid_cert_us-east-1.pem" rsa/
python3 - "$V" <<'EOF'
import json, sys
v = sys.argv[1]
json.dump({"kind": "aws-iid", "pkcs7": open(v + "/fullsailor_ec2_iid_2016_us-east-1.p7.pem").read()},
          open("real2016.json", "w"))
for i in (0, 1):
    json.dump({"kind": "aws-iid", "document": open(f"{v}/rspamd_iid{i}.json").read(),
               "signature": open(f"{v}/rspamd_iid{i}.sig").read()}, open(f"real{i}.json", "w"))
json.dump({"kind": "aws-iid", "document": open(f"{v}/rspamd_iid1.json").read(),
           "signature": open(f"{v}/rspamd_iid0.sig").read()}, open("realmix.json", "w"))
EOF
check "real 2016 PKCS7 (DSA) IID" 0 "$SL" policy identity-verify --identity real2016.json --aws-trust dsa --at 2025-01-01T00:00:00Z
assert "instance i-f79fe56c" grep -qx "cloud.instance_id=i-f79fe56c" "$T/out"
check "real 2024 RSA-SHA256 IID (iid0)" 0 "$SL" policy identity-verify --identity real0.json --aws-trust rsa
check "real 2024 RSA-SHA256 IID (iid1)" 0 "$SL" policy identity-verify --identity real1.json --aws-trust rsa
check_err "iid0's signature over iid1" 3 "does not verify" "$SL" policy identity-verify --identity realmix.json --aws-trust rsa
check_err "2016 PKCS7 against the RSA certificate" 3 "wrong signer" "$SL" policy identity-verify --identity real2016.json --aws-trust rsa

# --- a region the policy denies, through explain
"$SL" policy keygen --secret-key p.key --public-key p.pub -W >/dev/null
printf '{"version":1,"datasets":[{"id":"d-*","allowed_regions":["eu"],"tee_kinds":["tpm2"]}]}' >policy.json
"$SL" policy sign --secret-key p.key --policy policy.json >/dev/null
printf '{"binding":"verified","tee.kind":"tpm2"}' >claims.json
EX=("$SL" policy explain --policy policy.json --policy-pubkey p.pub --claims claims.json --dataset d-1
	--gcp-jwks jwks.json --binding "$BINDING")
check "explain: signed EU region allowed" 0 "${EX[@]}" --identity good.jwt
check "explain: signed US region denied" 4 "${EX[@]}" --identity us.jwt
assert "reason names the region rule" grep -q 'allowed_regions: region gcp:us-central1 is not in the allowed regions \[eu\]' "$T/out"
check_err "explain: a forged token is an attestation failure, not a decision" 3 "signature does not verify" \
	"${EX[@]}" --identity wrongsigner.jwt
printf '{"kind":"unsigned","region":"gcp:europe-west4"}' >unsigned.json
check "explain: unsigned region refused" 4 "${EX[@]}" --identity unsigned.json
assert "reason: unverified region" grep -q 'allow_unverified_region: region gcp:europe-west4 is not signed' "$T/out"

# --- collection from a loopback metadata server (127.0.0.1 only, killed by pid)
cp good.jwt served.jwt
cat >meta.py <<'EOF'
import http.server, sys, urllib.parse
port, binding = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_PUT(self):
        if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            return self.reply(200, b"tok-123")
        self.reply(403, b"no")
    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(u.query)
        if u.path == "/computeMetadata/v1/instance/service-accounts/default/identity":
            if self.headers.get("Metadata-Flavor") != "Google":
                return self.reply(403, b"Missing Metadata-Flavor:Google header")
            if q.get("audience") != [binding] or q.get("format") != ["full"]:
                return self.reply(400, b"bad audience")
            return self.reply(200, open("served.jwt", "rb").read())
        if self.headers.get("X-aws-ec2-metadata-token") != "tok-123":
            return self.reply(401, b"")
        if u.path == "/latest/dynamic/instance-identity/document":
            return self.reply(200, open("doc.json", "rb").read())
        if u.path == "/latest/dynamic/instance-identity/pkcs7":
            return self.reply(200, open("doc.p7.b64", "rb").read())
        self.reply(404, b"")
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
EOF
base64 doc.p7 >doc.p7.b64
MPORT=$(free_port)
python3 meta.py "$MPORT" "$BINDING" &
MPID=$!
_PIDS+=("$MPID")
wait_port "$MPORT"
export SECLAUNCH_GCP_METADATA_URL=http://127.0.0.1:$MPORT SECLAUNCH_AWS_METADATA_URL=http://127.0.0.1:$MPORT
check "collect GCP token (audience = binding)" 0 "$SL" policy identity-collect --cloud gcp --binding "$BINDING" -o gcp-doc.json
check "collected GCP token verifies as fresh" 0 "${IV[@]}" --identity gcp-doc.json
assert "fresh" grep -qx "cloud.identity_fresh=true" "$T/out"
check_err "collect with another binding: the server refuses" 3 "HTTP 400" \
	"$SL" policy identity-collect --cloud gcp --binding "$(python3 -c 'print("cd" * 32)')" -o x.json
check "collect AWS document (IMDSv2 token flow)" 0 "$SL" policy identity-collect --cloud aws -o aws-doc.json
check "collected AWS document verifies" 0 "$SL" policy identity-verify --identity aws-doc.json --aws-trust trust1
assert "collected AWS region" grep -qx "cloud.region=eu-west-1" "$T/out"
check "collect auto finds GCP first" 0 "$SL" policy identity-collect --binding "$BINDING" -o auto.json
assert "auto chose gcp" grep -q '"kind": "gcp-jwt"' auto.json
stop_pid "$MPID"
DEAD=$(free_port)
export SECLAUNCH_GCP_METADATA_URL=http://127.0.0.1:$DEAD SECLAUNCH_AWS_METADATA_URL=http://127.0.0.1:$DEAD
check_err "no metadata server: fails fast with exit 3" 3 "no cloud metadata server answered" \
	timeout 20 "$SL" policy identity-collect --binding "$BINDING" -o none.json

finish

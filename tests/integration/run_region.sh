#!/usr/bin/env bash
# seclaunch run with a SIGNED region: a loopback GCP-style metadata server
# mints RS256 identity tokens (test key made here with openssl) whose
# audience is the audience it is asked for; seclaunchd --dev checks them
# with the same JWKS. The policy does NOT allow unverified regions.
# Cases: a fresh token for the allowed region runs the job; an unsigned
# --region is refused; a token for another region is denied; a token from
# an unknown signer and a token collected earlier (another run's audience)
# are attestation failures; nothing is fetched or run in any refused case.
. "$(dirname "$0")/lib.sh"

for tool in swtpm minisign python3 openssl basenc; do
	if ! command -v "$tool" >/dev/null; then
		skip run_region "$tool not installed"
		finish
	fi
done
if ! "$SL" run --help >/dev/null 2>&1 || [ ! -x "$SLD" ]; then
	skip run_region "seclaunch run or seclaunchd not built"
	finish
fi

openssl genrsa -out "$T/k1.pem" 2048 2>/dev/null
openssl genrsa -out "$T/k2.pem" 2048 2>/dev/null
python3 - "$T/k1.pem" >"$T/jwks.json" <<'EOF'
import base64, json, subprocess, sys
mod = subprocess.run(["openssl", "rsa", "-in", sys.argv[1], "-noout", "-modulus"],
                     capture_output=True, text=True, check=True).stdout.strip().split("=")[1]
b = lambda x: base64.urlsafe_b64encode(x).rstrip(b"=").decode()
print(json.dumps({"keys": [{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "k1",
                            "n": b(bytes.fromhex(mod)), "e": b((65537).to_bytes(3, "big"))}]}))
EOF

# The metadata server: zone and signing key are read from files per request,
# so a case can change them between runs.
echo europe-west4-a >"$T/zone"
echo "$T/k1.pem" >"$T/signer"
cat >"$T/meta.py" <<'EOF'
import base64, http.server, json, subprocess, sys, time, urllib.parse
port, d = int(sys.argv[1]), sys.argv[2]
b64 = lambda x: base64.urlsafe_b64encode(x).rstrip(b"=")
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(u.query)
        if u.path != "/computeMetadata/v1/instance/service-accounts/default/identity":
            return self.reply(404, b"")
        if self.headers.get("Metadata-Flavor") != "Google" or "audience" not in q:
            return self.reply(400, b"bad request")
        zone = open(d + "/zone").read().strip()
        key = open(d + "/signer").read().strip()
        now = int(time.time())
        h = b64(json.dumps({"alg": "RS256", "kid": "k1", "typ": "JWT"}).encode())
        p = b64(json.dumps({"iss": "https://accounts.google.com", "aud": q["audience"][0],
                            "iat": now - 2, "exp": now + 3598, "google": {"compute_engine": {
                                "project_id": "p1", "project_number": 42, "zone": zone,
                                "instance_id": "9", "instance_name": "vm"}}}).encode())
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=h + b"." + p,
                             capture_output=True, check=True).stdout
        self.reply(200, h + b"." + p + b"." + b64(sig))
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
EOF
MPORT=$(free_port)
python3 "$T/meta.py" "$MPORT" "$T" &
_PIDS+=($!)
wait_port "$MPORT"
export SECLAUNCH_GCP_METADATA_URL=http://127.0.0.1:$MPORT

start_swtpm tpm || {
	echo "not ok - no swtpm"
	exit 1
}
minisign -G -W -p "$T/p.pub" -s "$T/p.key" >/dev/null 2>&1
cat >"$T/policy.json" <<'EOF'
{"version": 1, "description": "run_region: signed regions only",
 "keys": {"rk": ["region-ds"]},
 "datasets": [{"id": "region-ds", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
               "require_fresh_identity": true}]}
EOF
minisign -S -s "$T/p.key" -m "$T/policy.json" -t region >/dev/null 2>&1
printf '{"gcp_jwks": "%s"}\n' "$T/jwks.json" >"$T/kms.json"
start_kms "$T/kms" --config "$T/kms.json" --policy "$T/policy.json" --policy-pubkey "$T/p.pub" || {
	echo "not ok - seclaunchd did not start"
	exit 1
}
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "enroll" 0 "$SL" enroll "${K[@]}" --tcti "$SWTPM_TCTI"
check "key create" 0 "$SL" key create "${K[@]}" --admin-token-file "$KMS_TOKEN" --id rk
printf 'ts,value\n1,2\n' >"$T/plain"
check "encrypt" 0 "$SL" encrypt "${K[@]}" --key-id rk --admin-token-file "$KMS_TOKEN" \
	--dataset-id region-ds -q "$T/plain" -o "$T/ds.sld"
rm -f "$T/plain"

RUNA=(--policy "$T/policy.json" --policy-pubkey "$T/p.pub" "${K[@]}" --tcti "$SWTPM_TCTI"
	--stage host --audit-log "$T/audit.log" --gcp-jwks "$T/jwks.json")
job=(-- sh -c 'touch "$0"' "$T/ran")
ran() { [ -e "$T/ran" ]; }
not_ran() { [ ! -e "$T/ran" ]; }

check "fresh signed token for the allowed region: the job runs" 0 \
	"$SL" run "${RUNA[@]}" --cloud-identity metadata:gcp "$T/ds.sld" "${job[@]}"
assert "the job ran" ran
assert "the region is reported verified" grep -q "region gcp:europe-west4 (verified)" "$T/err"
rm -f "$T/ran"

check_err "unsigned --region under a policy without allow_unverified_region" 4 \
	"allow_unverified_region" "$SL" run "${RUNA[@]}" --region gcp:europe-west4 "$T/ds.sld" "${job[@]}"
assert "unsigned region: no job" not_ran
assert "unsigned region: nothing fetched" grep -q "nothing was fetched" "$T/err"

echo us-central1-a >"$T/zone"
check_err "signed token for a region the policy does not allow" 4 "us-central1" \
	"$SL" run "${RUNA[@]}" --cloud-identity metadata:gcp "$T/ds.sld" "${job[@]}"
assert "other region: no job" not_ran
echo europe-west4-a >"$T/zone"

echo "$T/k2.pem" >"$T/signer"
check_err "token from a signer not in the JWKS: attestation failure" 3 "signature" \
	"$SL" run "${RUNA[@]}" --cloud-identity metadata:gcp "$T/ds.sld" "${job[@]}"
assert "unknown signer: no job" not_ran
echo "$T/k1.pem" >"$T/signer"

# a token minted for someone else's binding, saved to a file and replayed
curl -s -H "Metadata-Flavor: Google" \
	"http://127.0.0.1:$MPORT/computeMetadata/v1/instance/service-accounts/default/identity?audience=$(printf 'ab%.0s' $(seq 32))&format=full" \
	>"$T/old.jwt"
check_err "replayed token (another binding as audience): attestation failure" 3 "audience" \
	"$SL" run "${RUNA[@]}" --cloud-identity "$T/old.jwt" "$T/ds.sld" "${job[@]}"
assert "replayed token: no job" not_ran
assert "no release was made for any refused run" \
	test "$(grep -c '"run.release"' "$T/audit.log")" -eq 1
finish

#!/usr/bin/env bash
# Trust through certificates: the real GCE vTPM vectors (AK certificate chain,
# event log, pinned time), an AK certificate a test CA issues for a swtpm AK
# (stored in NV where seclaunch attest reads it), and an EK certificate made
# by swtpm_setup + swtpm_localca.
. "$(dirname "$0")/lib.sh"

V=$SL_VECTORS/tpm2
AT=2024-01-01T00:00:00Z
N=0badc0ffee0badc0ffee0badc0ffee0badc0ffee0badc0ffee0badc0ffee0bad

# ---- GCE vTPM (COS 85), real ---------------------------------------------------
for tag in gce-cos-85-no-nonce gce-cos-85-nonce9009; do
	bind=--no-binding
	[ $tag = gce-cos-85-nonce9009 ] && bind="--nonce 9009"
	for bank in sha1 sha256 sha384; do
		gce_evidence $tag $bank "$T/g-$tag-$bank.json"
		check "gce $tag $bank: verifies with --trust and --at" 0 "$SL" verify "$T/g-$tag-$bank.json" $bind --trust "$V/ca" --at $AT --json
		pcr7=$(sed -n 's/^7 //p' "$V/gce-cos85/$tag.pcrs_$bank.txt")
		assert "gce $tag $bank: claims (AK by certificate, log replayed PCRs 0-9, secure boot on, PCR 7)" \
			test "$(claim "$T/out" tpm.ak.trust)/$(claim "$T/out" tpm.eventlog)/$(claim "$T/out" tpm.eventlog.pcrs)/$(claim "$T/out" tpm.secure_boot)/$(claim "$T/out" tpm.pcr.$bank.7)" = \
			"certificate/replayed/0,1,2,3,4,5,6,7,8,9/enabled/$pcr7"
	done
done
G=$T/g-gce-cos-85-nonce9009-sha256.json
check "gce: claims" 0 "$SL" verify "$G" --nonce 9009 --trust "$V/ca" --at $AT --json
assert "gce: binding, reset count, AK name" \
	test "$(claim "$T/out" binding)/$(claim "$T/out" tpm.reset_count)/$(claim "$T/out" tpm.ak.name | cut -c1-4)" = "9009/10/000b"
check_err "gce: wrong nonce" 3 "extraData" "$SL" verify "$G" --nonce 9008 --trust "$V/ca" --at $AT
check_err "gce: the no-nonce quote is not bound to 9009" 3 "extraData" "$SL" verify "$T/g-gce-cos-85-no-nonce-sha256.json" --nonce 9009 --trust "$V/ca" --at $AT

# event log edits: a digest (replay no longer gives the quoted PCR) and the
# SecureBoot variable's data (no longer what its digest measured)
python3 - "$V/gce-cos85/gce-cos-85.event_log.bin" "$T" <<'EOF'
import sys
log = open(sys.argv[1], "rb").read()
i = log.find("SecureBoot".encode("utf-16-le"))
assert i > 0
sb = bytearray(log)
sb[i + 20] ^= 1          # the variable's data byte (01 -> 00): "disabled"
open(sys.argv[2] + "/sb.bin", "wb").write(sb)
# the first PCR 0 event's SHA-256 digest: header is 32+ bytes, then events
hdr = 32 + int.from_bytes(log[28:32], "little")
e = bytearray(log)
e[hdr + 12 + 2 + 20 + 2 + 5] ^= 1    # pcrIndex, type, count, sha1, alg id, sha256[5]
open(sys.argv[2] + "/digest.bin", "wb").write(e)
EOF
ev_edit "$G" "$T/t.json" event_log replace "$(b64 "$T/digest.bin")"
check_err "gce: event log digest edited" 3 "event log: replay of PCR sha256.0" "$SL" verify "$T/t.json" --nonce 9009 --trust "$V/ca" --at $AT
ev_edit "$G" "$T/t.json" event_log replace "$(b64 "$T/sb.bin")"
check_err "gce: SecureBoot variable edited" 3 "SecureBoot variable\) data does not match" "$SL" verify "$T/t.json" --nonce 9009 --trust "$V/ca" --at $AT
ev_edit "$G" "$T/t.json" event_log truncate
check_err "gce: event log truncated" 3 "event log" "$SL" verify "$T/t.json" --nonce 9009 --trust "$V/ca" --at $AT

# AK certificate trust
mkdir -p "$T/other-ca" && cp "$V/ca/gcp_ek_ak_ca_root.crt" "$V/ca/gcp_ek_ak_ca_intermediate_v3.crt" "$T/other-ca/"
check_err "gce: AK cert from a CA not in --trust" 3 "AK certificate: certificate chain .*unable to get local issuer" "$SL" verify "$G" --nonce 9009 --trust "$T/other-ca" --at $AT
check_err "gce: AK cert after it expired (--at 2052)" 3 "certificate has expired" "$SL" verify "$G" --nonce 9009 --trust "$V/ca" --at 2052-01-01T00:00:00Z
check_err "gce: AK cert before it was valid (--at 2020)" 3 "certificate is not yet valid" "$SL" verify "$G" --nonce 9009 --trust "$V/ca" --at 2020-01-01T00:00:00Z
ev_edit "$G" "$T/t.json" ak_cert delete
check_err "gce: --trust but no AK certificate" 3 "AK not trusted: the evidence carries no AK certificate" "$SL" verify "$T/t.json" --nonce 9009 --trust "$V/ca" --at $AT
mkdir -p "$T/empty"
check_err "gce: an empty trust directory" 2 "no CA certificates" "$SL" verify "$G" --nonce 9009 --trust "$T/empty" --at $AT

# ---- an AK certificate for a swtpm AK, in NV 0x01c10000 -------------------------
start_swtpm tpm || exit 1
check "swtpm: attest (creates the AK)" 0 "$SL" attest --tee tpm2 --nonce $N --export-ak "$T/ak.pem" -o "$T/noc.json"
python3 - "$T" <<'EOF'
import datetime, sys
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
t = sys.argv[1]
now = datetime.datetime.now(datetime.timezone.utc)
ak = serialization.load_pem_public_key(open(t + "/ak.pem", "rb").read())
def ca(name, d):
    k = ec.generate_private_key(ec.SECP256R1())
    n = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    c = (x509.CertificateBuilder().subject_name(n).issuer_name(n).public_key(k.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
         .not_valid_after(now + datetime.timedelta(days=3650))
         .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
         .sign(k, hashes.SHA256()))
    import os; os.makedirs(t + "/" + d, exist_ok=True)
    open(t + "/" + d + "/ca.pem", "wb").write(c.public_bytes(serialization.Encoding.PEM))
    return k, n
def leaf(key, issuer, nb, na, out):
    c = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ak")]))
         .issuer_name(issuer).public_key(ak).serial_number(x509.random_serial_number())
         .not_valid_before(nb).not_valid_after(na).sign(key, hashes.SHA256()))
    open(t + "/" + out, "wb").write(c.public_bytes(serialization.Encoding.DER))
k1, n1 = ca("seclaunch test AK CA", "akca")
k2, n2 = ca("some other CA", "otherca")
leaf(k1, n1, now - datetime.timedelta(days=1), now + datetime.timedelta(days=30), "akcert.der")
leaf(k1, n1, now - datetime.timedelta(days=60), now - datetime.timedelta(days=30), "expired.der")
EOF
nv_put() { # FILE: (re)defines NV 0x01c10000 with FILE's bytes
	tpm2_nvundefine -C o 0x01c10000 >/dev/null 2>&1
	tpm2_nvdefine -C o -s "$(stat -c %s "$1")" -a 'ownerwrite|ownerread|authread|authwrite|no_da' 0x01c10000 >/dev/null &&
		tpm2_nvwrite -C o -i "$1" 0x01c10000 >/dev/null
}
nv_put "$T/akcert.der"
check "swtpm: attest reads the AK certificate from NV" 0 "$SL" attest --tee tpm2 --nonce $N -o "$T/c.json"
assert "swtpm: evidence carries ak_cert from 0x01c10000" test "$(ev_get "$T/c.json" ak_cert_nv)" = 0x01c10000
check "swtpm: verify --trust (AK certificate)" 0 "$SL" verify "$T/c.json" --nonce $N --trust "$T/akca" --json
assert "swtpm: tpm.ak.trust=certificate" test "$(claim "$T/out" tpm.ak.trust)" = certificate
check_err "swtpm: AK cert from an untrusted CA" 3 "AK certificate: certificate chain" "$SL" verify "$T/c.json" --nonce $N --trust "$T/otherca"
# a certificate for another key: the GCE AK certificate put in this TPM's NV
nv_put "$V/gce-cos85/gce-cos-85.ak_cert.der"
check "swtpm: attest with another key's certificate in NV" 0 "$SL" attest --tee tpm2 --nonce $N -o "$T/w.json"
check_err "swtpm: AK cert for another key" 3 "the certificate's public key is not this key" "$SL" verify "$T/w.json" --nonce $N --trust "$V/ca"
nv_put "$T/expired.der"
check "swtpm: attest with an expired AK cert in NV" 0 "$SL" attest --tee tpm2 --nonce $N -o "$T/x.json"
check_err "swtpm: expired AK cert" 3 "AK certificate: .*certificate has expired" "$SL" verify "$T/x.json" --nonce $N --trust "$T/akca"
stop_pid "$SWTPM_PID"

# ---- EK certificate: swtpm_setup + swtpm_localca ---------------------------------
L=$T/localca
mkdir -p "$L/ca" "$T/ektpm"
cat >"$L/swtpm-localca.conf" <<EOF
statedir = $L/ca
signingkey = $L/ca/signkey.pem
issuercert = $L/ca/issuercert.pem
certserial = $L/ca/certserial
EOF
cat >"$L/swtpm_setup.conf" <<EOF
create_certs_tool = /usr/bin/swtpm_localca
create_certs_tool_config = $L/swtpm-localca.conf
create_certs_tool_options = /etc/swtpm-localca.options
active_pcr_banks = sha256,sha1
EOF
check "swtpm_setup --create-ek-cert with swtpm_localca" 0 swtpm_setup --tpm2 --create-ek-cert --tpmstate "$T/ektpm" --config "$L/swtpm_setup.conf" --overwrite
start_swtpm ektpm || exit 1
check "ek: attest" 0 "$SL" attest --tee tpm2 --nonce $N --export-ak "$T/ek-ak.pem" -o "$T/ek.json"
assert "ek: evidence carries the EK certificate from 0x01c00002" test "$(ev_get "$T/ek.json" ek_cert_nv)" = 0x01c00002
check "ek: verify with the localca as trust" 0 "$SL" verify "$T/ek.json" --nonce $N --ak-pin "$T/ek-ak.pem" --trust "$L/ca" --json
assert "ek: tpm.ek.cert=verified" test "$(claim "$T/out" tpm.ek.cert)" = verified
check "ek: verify under another CA" 0 "$SL" verify "$T/ek.json" --nonce $N --ak-pin "$T/ek-ak.pem" --trust "$V/ca" --json
assert "ek: another CA: tpm.ek.cert=unverified" test "$(claim "$T/out" tpm.ek.cert)" = unverified
# swtpm_setup allocated only sha256 and sha1 here
check_err "ek: a bank the TPM has not allocated" 7 "has not allocated .*PCR bank sha384" "$SL" attest --tee tpm2 --nonce $N --pcrs sha384:0 -o "$T/x-sha384.json"

finish

#!/usr/bin/env bash
# `policy explain` in text says the key_ttl the decision carries (the
# shortest of the rules that matched), as its --json does, and says "none"
# where no rule sets one.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
cat >p.json <<'EOF2'
{"version": 1, "allow_unverified_region": true, "keys": {"k": ["d-*"]},
 "datasets": [
  {"id": "d-lease", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"], "key_ttl": 300},
  {"id": "d-plain", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"]}]}
EOF2
"$SL" policy keygen --secret-key pk --public-key pk.pub -W >/dev/null 2>&1
check "sign" 0 "$SL" policy sign --secret-key pk --policy p.json
printf '{"binding": "verified", "tee.kind": "tpm2", "cloud.provider": "gcp", "cloud.region": "europe-west4"}' >c.json
X=(policy explain --policy p.json --policy-pubkey pk.pub --claims c.json --key k)
check "explain d-lease" 0 "$SL" "${X[@]}" --dataset d-lease
assert "the text says key_ttl: 300 s" grep -q "^key_ttl: 300 s" "$T/out"
check "explain d-lease --json" 0 "$SL" "${X[@]}" --dataset d-lease --json
assert "... as --json does" grep -q '"key_ttl": 300' "$T/out"
check "explain d-plain" 0 "$SL" "${X[@]}" --dataset d-plain
assert "no key_ttl: the text says none" grep -q "^key_ttl: none" "$T/out"
finish

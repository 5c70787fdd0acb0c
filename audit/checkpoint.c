/* Signed checkpoints: the Ed25519 key pair, the signed message, verification.
 *
 * A checkpoint record commits, through its prev field, to every line before
 * it; the signature covers prev together with the checkpoint's own seq, time,
 * host, actor, reason and key id, so a checkpoint cannot be moved, edited or
 * made up without the secret key. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit_int.h"
#include "seclaunch/secret.h"

#define CHECKPOINT_DOMAIN "seclaunch-audit-checkpoint-v1"

void audit_key_id(const uint8_t pk[static AUDIT_PK_LEN], char out[static AUDIT_KEYID_HEX + 1])
{
	uint8_t d[SL_SHA256_LEN];
	sl_sha256(pk, AUDIT_PK_LEN, d);
	sl_hex_encode(d, AUDIT_KEYID_BYTES, out);
}

static SL_RESULT put_field(sl_writer *w, const char *s)
{
	sl_err rc = SL_E_INTERNAL;
	size_t n = s != NULL ? strlen(s) : 0;
	SL_ENSURE(n <= UINT32_MAX, SL_E_TOO_LARGE, "checkpoint field too long");
	SL_GUARD(sl_write_u32be(w, (uint32_t)n));
	SL_GUARD(sl_write_bytes(w, s, n));
	rc = SL_OK;
out:
	return rc;
}

sl_err audit_checkpoint_message(json_t *rec, sl_writer *w)
{
	sl_err rc = SL_E_INTERNAL;
	char seq[24];
	json_t *d = json_object_get(rec, "details");

	snprintf(seq, sizeof(seq), "%lld",
	         (long long)json_integer_value(json_object_get(rec, "seq")));
	SL_GUARD(put_field(w, CHECKPOINT_DOMAIN));
	SL_GUARD(put_field(w, seq));
	SL_GUARD(put_field(w, audit_str(rec, "time")));
	SL_GUARD(put_field(w, audit_str(rec, "host")));
	SL_GUARD(put_field(w, audit_str(rec, "actor")));
	SL_GUARD(put_field(w, audit_str(d, "reason")));
	SL_GUARD(put_field(w, audit_str(d, "key_id")));
	SL_GUARD(put_field(w, audit_str(rec, "prev")));
	rc = SL_OK;
out:
	return rc;
}

sl_err audit_read_pubkey(const char *path, uint8_t pk[static AUDIT_PK_LEN])
{
	sl_err rc = SL_E_INPUT;
	uint8_t *data = NULL;
	size_t len = 0;

	SL_GUARD(sl_file_read(path, 256, &data, &len));
	while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r' || data[len - 1] == ' '))
		data[--len] = '\0';
	SL_ENSURE(audit_is_hex((const char *)data, 2 * AUDIT_PK_LEN), SL_E_INPUT,
	          "%s: not an audit public key (want 64 lower-case hex digits on one line)", path);
	SL_GUARD(sl_hex_decode((const char *)data, pk, AUDIT_PK_LEN, path));
	rc = SL_OK;
out:
	free(data);
	return rc;
}

sl_err audit_checkpoint_verify(json_t *rec, const uint8_t pk[static AUDIT_PK_LEN])
{
	sl_err rc = SL_E_INTEGRITY;
	sl_writer w;
	uint8_t *sig = NULL;
	size_t siglen = 0;
	char want_id[AUDIT_KEYID_HEX + 1];
	json_t *d = json_object_get(rec, "details");
	const char *got_id = audit_str(d, "key_id");

	sl_writer_init(&w, 64 * 1024);
	audit_key_id(pk, want_id);
	SL_ENSURE(got_id != NULL && strcmp(got_id, want_id) == 0, SL_E_WRONG_KEY,
	          "checkpoint signature: signed by key %s, not by the given public key (%s)",
	          got_id != NULL ? got_id : "?", want_id);
	rc = sl_b64_decode(audit_str(d, "sig"), AUDIT_SIG_LEN, &sig, &siglen, "details.sig");
	SL_ENSURE(rc == SL_OK && siglen == AUDIT_SIG_LEN, SL_E_INTEGRITY,
	          "checkpoint signature: details.sig is not a 64-byte base64 signature");
	SL_GUARD(audit_checkpoint_message(rec, &w));
	SL_ENSURE(crypto_sign_verify_detached(sig, w.data, w.len, pk) == 0, SL_E_INTEGRITY,
	          "checkpoint signature: invalid (forged or edited checkpoint, key %s)", want_id);
	rc = SL_OK;
out:
	free(sig);
	sl_writer_free(&w);
	return rc;
}

/* Creates path exclusively with mode and writes data; fsyncs. */
static SL_RESULT write_new(const char *path, const void *data, size_t len, mode_t mode)
{
	sl_err rc = SL_E_IO;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0 && errno == EEXIST)
		return sl_err_set(SL_E_EXISTS, "%s: exists; refusing to overwrite a key", path);
	SL_ENSURE(fd >= 0, SL_E_IO, "%s: cannot create: %s", path, strerror(errno));
	SL_ENSURE(fchmod(fd, mode) == 0, SL_E_IO, "%s: chmod: %s", path, strerror(errno));
	SL_GUARD(sl_write_all(fd, data, len, path));
	SL_ENSURE(fsync(fd) == 0, SL_E_IO, "%s: fsync: %s", path, strerror(errno));
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	if (rc != SL_OK && rc != SL_E_EXISTS)
		unlink(path);
	return rc;
}

sl_err sl_audit_keygen(const char *secret_key_path, const char *public_key_path)
{
	sl_err rc = SL_E_CRYPTO;
	sl_secret *seed = NULL, *sk = NULL;
	uint8_t pk[AUDIT_PK_LEN];
	char line[2 * AUDIT_PK_LEN + 2];

	SL_ENSURE(secret_key_path != NULL && public_key_path != NULL &&
	              strcmp(secret_key_path, public_key_path) != 0,
	          SL_E_USAGE, "keygen: need two different paths for the secret and public key");
	SL_GUARD(sl_secret_random(AUDIT_SEED_LEN, &seed));
	SL_GUARD(sl_secret_new(crypto_sign_SECRETKEYBYTES, &sk));
	SL_GUARD_SODIUM(crypto_sign_seed_keypair(pk, sl_secret_data(sk), sl_secret_data(seed)),
	                SL_E_CRYPTO, "Ed25519 key generation failed");
	sl_hex_encode(pk, AUDIT_PK_LEN, line);
	line[2 * AUDIT_PK_LEN] = '\n';
	line[2 * AUDIT_PK_LEN + 1] = '\0';
	/* the public key first: a failure then leaves no orphan secret key */
	SL_GUARD(write_new(public_key_path, line, 2 * AUDIT_PK_LEN + 1, 0644));
	rc = write_new(secret_key_path, sl_secret_data(seed), AUDIT_SEED_LEN, 0600);
	if (rc != SL_OK) {
		unlink(public_key_path);
		goto out;
	}
	rc = SL_OK;
out:
	sl_secret_free(seed);
	sl_secret_free(sk);
	return rc;
}

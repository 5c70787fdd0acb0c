/* Part of snp_test.c: a complete, self-consistent forged chain (self-made
 * ARK -> ASK -> VCEK with the report's chip_id and TCB, the report re-signed
 * with the forged VCEK) is refused only because the ARK is not pinned. */

static EVP_PKEY *gen_key(bool ec)
{
	EVP_PKEY *k = ec ? EVP_EC_gen("P-384") : EVP_RSA_gen(2048);
	assert_non_null(k);
	return k;
}

static void add_ext(X509 *x, const char *oid, const uint8_t *der, size_t n)
{
	ASN1_OBJECT *obj = OBJ_txt2obj(oid, 1);
	ASN1_OCTET_STRING *os = ASN1_OCTET_STRING_new();
	assert_int_equal(ASN1_OCTET_STRING_set(os, der, (int)n), 1);
	X509_EXTENSION *e = X509_EXTENSION_create_by_OBJ(NULL, obj, 0, os);
	assert_non_null(e);
	assert_int_equal(X509_add_ext(x, e, -1), 1);
	X509_EXTENSION_free(e);
	ASN1_OCTET_STRING_free(os);
	ASN1_OBJECT_free(obj);
}

static void add_int_ext(X509 *x, const char *oid, uint8_t v)
{
	uint8_t der[4] = {0x02, 0x01, v};
	if (v < 0x80) {
		add_ext(x, oid, der, 3);
	} else {
		uint8_t d2[4] = {0x02, 0x02, 0x00, v};
		add_ext(x, oid, d2, 4);
	}
}

static X509 *make_cert(const char *cn, EVP_PKEY *key, X509 *issuer, bool ca)
{
	X509 *x = X509_new();
	assert_int_equal(X509_set_version(x, 2), 1);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_NAME *n = X509_NAME_new();
	X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC,
	                           (const unsigned char *)"Advanced Micro Devices", -1, -1, 0);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_subject_name(x, n);
	X509_set_issuer_name(x, issuer != NULL ? X509_get_subject_name(issuer) : n);
	X509_NAME_free(n);
	ASN1_TIME_set(X509_getm_notBefore(x), 1577836800); /* 2020 */
	ASN1_TIME_set(X509_getm_notAfter(x), 2524608000);  /* 2050 */
	X509_set_pubkey(x, key);
	if (ca) {
		X509V3_CTX ctx;
		X509V3_set_ctx(&ctx, issuer != NULL ? issuer : x, x, NULL, NULL, 0);
		X509_EXTENSION *e =
		    X509V3_EXT_conf_nid(NULL, &ctx, NID_basic_constraints, "critical,CA:TRUE");
		X509_add_ext(x, e, -1);
		X509_EXTENSION_free(e);
	}
	return x;
}

static void sign_cert(X509 *x, EVP_PKEY *k)
{
	assert_true(X509_sign(x, k, EVP_sha384()) > 0);
}

static void write_pem(const char *path, X509 *const *xs, int n)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	for (int i = 0; i < n; i++)
		assert_int_equal(PEM_write_X509(f, xs[i]), 1);
	fclose(f);
}

static void resign_report(uint8_t *rep, EVP_PKEY *k)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char der[160];
	size_t dl = sizeof(der);
	assert_int_equal(EVP_DigestSignInit(md, NULL, EVP_sha384(), NULL, k), 1);
	assert_int_equal(EVP_DigestSign(md, der, &dl, rep, SL_SNP_SIGNED_LEN), 1);
	const unsigned char *p = der;
	ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long)dl);
	assert_non_null(sig);
	memset(rep + 0x2A0, 0, 144);
	assert_int_equal(BN_bn2lebinpad(ECDSA_SIG_get0_r(sig), rep + 0x2A0, 72), 72);
	assert_int_equal(BN_bn2lebinpad(ECDSA_SIG_get0_s(sig), rep + 0x2E8, 72), 72);
	ECDSA_SIG_free(sig);
	EVP_MD_CTX_free(md);
}

static void test_forged_chain(void **state)
{
	(void)state;
	size_t len = 0;
	uint8_t *rep = load("virtee_milan_report.bin", &len);
	EVP_PKEY *kark = gen_key(false), *kask = gen_key(false), *kvcek = gen_key(true);
	X509 *ark = make_cert("ARK-Milan", kark, NULL, true);
	sign_cert(ark, kark);
	X509 *ask = make_cert("SEV-Milan", kask, ark, true);
	sign_cert(ask, kark);
	X509 *vcek = make_cert("SEV-VCEK", kvcek, ask, false);
	uint8_t hwid[66] = {0x04, 0x40};
	memcpy(hwid + 2, rep + 0x1A0, 64);
	add_ext(vcek, "1.3.6.1.4.1.3704.1.4", hwid, sizeof(hwid));
	add_int_ext(vcek, "1.3.6.1.4.1.3704.1.3.1", rep[0x180]);
	add_int_ext(vcek, "1.3.6.1.4.1.3704.1.3.2", rep[0x181]);
	add_int_ext(vcek, "1.3.6.1.4.1.3704.1.3.3", rep[0x186]);
	add_int_ext(vcek, "1.3.6.1.4.1.3704.1.3.8", rep[0x187]);
	sign_cert(vcek, kask);
	rep[0x90] ^= 0xff; /* a measurement of the forger's choice */
	resign_report(rep, kvcek);

	char dir[] = "/tmp/snpforge.XXXXXX", p[2048], p2[2048];
	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/ask_ark_milan.pem", dir);
	X509 *bundle[] = {ask, ark};
	write_pem(p, bundle, 2);
	snprintf(p2, sizeof(p2), "%s/vcek.pem", dir);
	write_pem(p2, &vcek, 1);

	/* the forged chain is internally consistent ... */
	STACK_OF(X509) *mids = sk_X509_new_null(), *roots = sk_X509_new_null();
	sk_X509_push(mids, ask);
	sk_X509_push(roots, ark);
	assert_int_equal(sl_x509_verify_chain(vcek, mids, roots, T2024, NULL, "forged"), SL_OK);
	sk_X509_free(mids);
	sk_X509_free(roots);
	/* ... and refused because the ARK is not pinned */
	expect_fail(verify(rep, len, "vcek", NULL, dir, T2024, NULL, 0, NULL),
	            SL_E_ATTEST_UNTRUSTED, "not a pinned AMD root", "forged chain");
	/* with the real trust bundle present too, the forged VCEK still has no path */
	char cp[4096];
	size_t bl = 0;
	uint8_t *real = load("trust/ask_ark_milan.pem", &bl);
	snprintf(cp, sizeof(cp), "%s/real.pem", dir);
	assert_int_equal(sl_file_write_atomic(cp, real, bl, 0600, false), SL_OK);
	free(real);
	expect_fail(verify(rep, len, "vcek", NULL, dir, T2024, NULL, 0, NULL), SL_E_ATTEST_CHAIN,
	            "chain invalid", "forged VCEK, real ARK");
	/* a self-made ARK with the real ASK: not pinned */
	unlink(cp);
	size_t al = 0;
	uint8_t *real_bundle = load("trust/ask_ark_milan.pem", &al);
	STACK_OF(X509) *st = sk_X509_new_null();
	assert_int_equal(sl_x509_parse_blob(real_bundle, al, st, NULL, "milan"), SL_OK);
	X509 *mixed[] = {sk_X509_value(st, 0), ark};
	write_pem(p, mixed, 2);
	unlink(p2);
	expect_fail(verify(rep, len, "vcek", "virtee_milan_vcek.der", dir, T2024, NULL, 0, NULL),
	            SL_E_ATTEST_UNTRUSTED, "not a pinned AMD root", "self-made ARK");
	sk_X509_pop_free(st, X509_free);
	free(real_bundle);
	unlink(p);
	rmdir(dir);
	X509_free(ark);
	X509_free(ask);
	X509_free(vcek);
	EVP_PKEY_free(kark);
	EVP_PKEY_free(kask);
	EVP_PKEY_free(kvcek);
	free(rep);
}

/* A KDS cache directory may hold several VCEKs of one chip (one per TCB):
 * the one whose TCB matches the report is used, whatever the file order. */
static void test_vcek_per_tcb(void **state)
{
	(void)state;
	size_t len = 0, bl = 0, vl = 0;
	uint8_t *rep = load("virtee_milan_report.bin", &len);
	uint8_t *bundle = load("trust/ask_ark_milan.pem", &bl);
	uint8_t *real = load("virtee_milan_vcek.der", &vl);
	EVP_PKEY *k = gen_key(true);
	X509 *other = make_cert("SEV-VCEK", k, NULL, false);
	uint8_t hwid[66] = {0x04, 0x40};
	memcpy(hwid + 2, rep + 0x1A0, 64);
	add_ext(other, "1.3.6.1.4.1.3704.1.4", hwid, sizeof(hwid));
	add_int_ext(other, "1.3.6.1.4.1.3704.1.3.1", (uint8_t)(rep[0x180] + 1));
	add_int_ext(other, "1.3.6.1.4.1.3704.1.3.2", rep[0x181]);
	add_int_ext(other, "1.3.6.1.4.1.3704.1.3.3", rep[0x186]);
	add_int_ext(other, "1.3.6.1.4.1.3704.1.3.8", rep[0x187]);
	sign_cert(other, k);
	char dir[] = "/tmp/snpkds.XXXXXX", p[2048];
	assert_non_null(mkdtemp(dir));
	const char *names[] = {"a_other_tcb.pem", "b_real.der", "cert_chain.pem"};
	snprintf(p, sizeof(p), "%s/%s", dir, names[0]);
	write_pem(p, &other, 1);
	snprintf(p, sizeof(p), "%s/%s", dir, names[1]);
	assert_int_equal(sl_file_write_atomic(p, real, vl, 0600, false), SL_OK);
	snprintf(p, sizeof(p), "%s/%s", dir, names[2]);
	assert_int_equal(sl_file_write_atomic(p, bundle, bl, 0600, false), SL_OK);
	assert_int_equal(verify(rep, len, "vcek", NULL, dir, T2024, NULL, 0, NULL), SL_OK);
	/* the collateral is tried before the evidence: its wrong-TCB VCEK must
	 * still lose to the evidence's matching one */
	snprintf(p, sizeof(p), "%s/%s", dir, names[1]);
	unlink(p);
	assert_int_equal(
	    verify(rep, len, "vcek", "virtee_milan_vcek.der", dir, T2024, NULL, 0, NULL), SL_OK);
	expect_fail(verify(rep, len, "vcek", NULL, dir, T2024, NULL, 0, NULL), SL_E_ATTEST_CHAIN,
	            "chain invalid", "only a VCEK of another TCB");
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
	X509_free(other);
	EVP_PKEY_free(k);
	free(rep);
	free(bundle);
	free(real);
}

/* Part of tdx_test.c: PCS collateral (CRLs, TCB info, QE identity) and the
 * PCK certificate's SGX extension. */

static char tmpdir[64];

/* A fresh collateral directory with the named files of intel-tdx/collateral. */
static const char *mkcoll(const char *const *files, size_t n)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/tdxcoll.XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	for (size_t i = 0; i < n; i++) {
		char src[1024], dst[1024];
		size_t len = 0;
		snprintf(src, sizeof(src), "intel-tdx/collateral/%s", files[i]);
		uint8_t *b = load(src, &len);
		snprintf(dst, sizeof(dst), "%s/%s", tmpdir, files[i]);
		assert_int_equal(sl_file_write_atomic(dst, b, len, 0600, false), SL_OK);
		free(b);
	}
	return tmpdir;
}

static void rmcoll(const char *const *files, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char p[1024];
		snprintf(p, sizeof(p), "%s/%s", tmpdir, files[i]);
		unlink(p);
	}
	assert_int_equal(rmdir(tmpdir), 0);
}

static void test_pck_ext(void **state)
{
	(void)state;
	const struct {
		const char *chain, *fmspc;
	} c[] = {
	    {"pck_chain_from_gtg_quote_v4_spr_e4.pem", "50806f000000"},
	    {"pck_chain_from_trustee_quote_6.pem", "00a06d080000"},
	    {"pck_chain_from_gtg_quote_v5_sample.pem", "90c06f000000"},
	};
	for (size_t i = 0; i < 3; i++) {
		char p[512];
		size_t len = 0;
		snprintf(p, sizeof(p), "intel-tdx/collateral/%s", c[i].chain);
		uint8_t *b = load(p, &len);
		STACK_OF(X509) *st = sk_X509_new_null();
		assert_int_equal(sl_x509_parse_blob(b, len, st, NULL, p), SL_OK);
		assert_int_equal(sk_X509_num(st), 3);
		sl_pck_ext e;
		assert_int_equal(sl_pck_ext_from_cert(sk_X509_value(st, 0), &e), SL_OK);
		char hex[13];
		sl_hex_encode(e.fmspc, 6, hex);
		assert_string_equal(hex, c[i].fmspc);
		/* README: trustee_quote_6's PCE SVN is 11 */
		if (i == 1)
			assert_int_equal(e.pcesvn, 11);
		/* the PCK CA has no SGX extension */
		assert_int_equal(sl_pck_ext_from_cert(sk_X509_value(st, 1), &e), SL_E_ATTEST_CHAIN);
		/* the extension's DER, truncated or with a byte flipped in a tag */
		const ASN1_OCTET_STRING *os =
		    sl_x509_ext(sk_X509_value(st, 0), "1.2.840.113741.1.13.1");
		size_t n = (size_t)ASN1_STRING_length(os);
		uint8_t *d = malloc(n);
		memcpy(d, ASN1_STRING_get0_data(os), n);
		assert_int_equal(sl_pck_ext_parse_der(d, n, &e), SL_OK);
		assert_int_equal(sl_pck_ext_parse_der(d, n - 1, &e), SL_E_ATTEST_FORMAT);
		d[0] = 0x31; /* SET instead of SEQUENCE */
		assert_int_equal(sl_pck_ext_parse_der(d, n, &e), SL_E_ATTEST_FORMAT);
		free(d);
		sk_X509_pop_free(st, X509_free);
		free(b);
	}
}

static void test_crl(void **state)
{
	(void)state;
	const char *files[] = {"gtg_pckcrl_platform.der", "gtg_rootcrl.der"};
	size_t len = 0;
	uint8_t *q = load("intel-tdx/gtg_quote_v4_spr_e4.dat", &len);
	sl_claims *c = NULL;
	const char *d = mkcoll(files, 2);
	assert_int_equal(verify(q, len, d, T_QUOTES, NULL, 0, &c), SL_OK);
	/* README: the PCK leaf serial is not in the platform CA's CRL */
	assert_string_equal(sl_claims_get(c, "tdx.pck_crl"), "checked");
	sl_claims_free(c);
	/* a CRL whose signature does not verify */
	char p[512];
	snprintf(p, sizeof(p), "%s/gtg_pckcrl_platform.der", d);
	uint8_t *crl = NULL;
	size_t cl = 0;
	assert_int_equal(sl_file_read(p, 1 << 16, &crl, &cl), SL_OK);
	crl[cl - 5] ^= 1;
	assert_int_equal(sl_file_write_atomic(p, crl, cl, 0600, true), SL_OK);
	expect_fail(verify(q, len, d, T_QUOTES, NULL, 0, NULL), SL_E_ATTEST_CHAIN,
	            "CRL signature invalid", "bad CRL");
	free(crl);
	rmcoll(files, 2);
	free(q);
}

static const char *const gtg2023[] = {"gtg_tcbinfo_fmspc_50806f000000.json",
                                      "gtg_qe_identity_td_qe.json", "tcb_signing_chain.pem"};

/* The 2023 go-tdx-guest collateral (signed 2023-06 by the TCB Signing cert
 * valid until 2025-05-21) verifies; README: trustee_quote_4 UpToDate,
 * gtg_quote_v4_spr_e4 has no matching TCB level. */
static void test_tcb_gtg_2023(void **state)
{
	(void)state;
	const char *d = mkcoll(gtg2023, 3);
	size_t len = 0;
	sl_claims *c = NULL;
	uint8_t *q = load("intel-tdx/trustee_quote_4.dat", &len);
	assert_int_equal(verify(q, len, d, T_QUOTES, NULL, 0, &c), SL_OK);
	assert_string_equal(sl_claims_get(c, "tdx.tcb_status"), "UpToDate");
	assert_string_equal(sl_claims_get(c, "tdx.qe_tcb_status"), "UpToDate");
	assert_string_equal(sl_claims_get(c, "tdx.tcb_date"), "2023-02-15T00:00:00Z");
	/* nextUpdate 2023-07-18 is long past at 2026-02-15 */
	assert_string_equal(sl_claims_get(c, "tdx.collateral_stale"), "true");
	sl_claims_free(c);
	assert_int_equal(verify(q, len, d, 1687305600 /* 2023-06-21 */, NULL, 0, &c), SL_OK);
	assert_string_equal(sl_claims_get(c, "tdx.collateral_stale"), "false");
	sl_claims_free(c);
	free(q);
	q = load("intel-tdx/gtg_quote_v4_spr_e4.dat", &len);
	assert_int_equal(verify(q, len, d, T_QUOTES, NULL, 0, &c), SL_OK);
	assert_string_equal(sl_claims_get(c, "tdx.tcb_status"), "NotSupported");
	sl_claims_free(c);
	free(q);
	/* a quote whose FMSPC has no TCB info here: status unknown */
	q = load("intel-tdx/trustee_quote_6.dat", &len);
	assert_int_equal(verify(q, len, d, T_QUOTES, NULL, 0, &c), SL_OK);
	assert_string_equal(sl_claims_get(c, "tdx.tcb_status"), "unknown");
	sl_claims_free(c);
	free(q);
	rmcoll(gtg2023, 3);
}

static json_t *load_json(const char *name, const char *member)
{
	size_t len = 0;
	uint8_t *b = load(name, &len);
	json_t *j = json_loadb((const char *)b, len, 0, NULL);
	free(b);
	assert_non_null(j);
	json_t *m = json_incref(json_object_get(j, member));
	json_decref(j);
	return m;
}

static void eval_one(const char *quote, const char *tcbinfo, const char *want,
                     const char *want_module)
{
	size_t len = 0;
	uint8_t *q = load(quote, &len);
	sl_tdx_quote tq;
	assert_int_equal(sl_tdx_quote_parse(q, len, &tq), SL_OK);
	STACK_OF(X509) *st = sk_X509_new_null();
	assert_int_equal(sl_x509_parse_blob(tq.pck_chain, tq.pck_chain_len, st, NULL, quote),
	                 SL_OK);
	sl_pck_ext e;
	assert_int_equal(sl_pck_ext_from_cert(sk_X509_value(st, 0), &e), SL_OK);
	json_t *ti = load_json(tcbinfo, "tcbInfo");
	sl_tdx_tcb t;
	assert_int_equal(sl_tdx_tcb_eval(ti, &e, &tq.body, &t), SL_OK);
	if (strcmp(t.status, want) != 0 || strcmp(t.module_status, want_module) != 0)
		fail_msg("%s: status %s module %s, want %s / %s", quote, t.status, t.module_status,
		         want, want_module);
	json_decref(ti);
	sk_X509_pop_free(st, X509_free);
	free(q);
}

/* README's TCB statuses, through the level matching alone. */
static void test_tcb_eval(void **state)
{
	(void)state;
	eval_one("intel-tdx/trustee_quote_6.dat",
	         "intel-tdx/collateral/trustee_tcbinfo_fmspc_00a06d080000.json", "OutOfDate",
	         "UpToDate");
	eval_one("intel-tdx/gtg_quote_v5_sample.dat",
	         "intel-tdx/collateral/gtg_tcbinfo_fmspc_90c06f000000.json", "UpToDate",
	         "UpToDate");
	/* TDX_01 module isvsvn 5: below 6 (UpToDate), at least 4 (OutOfDate) */
	eval_one("intel-tdx/trustee_quote_5.dat",
	         "intel-tdx/collateral/gtg_tcbinfo_fmspc_90c06f000000.json", "NotSupported",
	         "OutOfDate");
	eval_one("intel-tdx/trustee_quote_4.dat",
	         "intel-tdx/collateral/gtg_tcbinfo_fmspc_50806f000000.json", "UpToDate", "");
	/* a TCB info for another FMSPC is refused */
	size_t len = 0;
	uint8_t *q = load("intel-tdx/trustee_quote_4.dat", &len);
	sl_tdx_quote tq;
	assert_int_equal(sl_tdx_quote_parse(q, len, &tq), SL_OK);
	sl_pck_ext e = {0};
	json_t *ti =
	    load_json("intel-tdx/collateral/gtg_tcbinfo_fmspc_90c06f000000.json", "tcbInfo");
	sl_tdx_tcb t;
	expect_fail(sl_tdx_tcb_eval(ti, &e, &tq.body, &t), SL_E_ATTEST_FORMAT, "FMSPC",
	            "wrong fmspc");
	json_decref(ti);
	/* QE identity: the QE report's MRSIGNER must match */
	json_t *qi =
	    load_json("intel-tdx/collateral/gtg_qe_identity_td_qe.json", "enclaveIdentity");
	char st[40];
	assert_int_equal(sl_tdx_qe_eval(qi, &tq.qe_report, st), SL_OK);
	assert_string_equal(st, "UpToDate");
	tq.qe_report.isvsvn = 3; /* below every level */
	assert_int_equal(sl_tdx_qe_eval(qi, &tq.qe_report, st), SL_OK);
	assert_string_equal(st, "OutOfDate");
	tq.qe_report.mrsigner[0] ^= 1;
	expect_fail(sl_tdx_qe_eval(qi, &tq.qe_report, st), SL_E_ATTEST_UNTRUSTED, "MRSIGNER",
	            "QE signer");
	json_decref(qi);
	free(q);
}

/* README: the trustee (2025-10) and 90c06f (2026-02) collateral were issued
 * after the included TCB Signing certificate expired (2025-05-21): strict
 * checking at issueDate refuses them. */
static void test_tcb_signing_expired(void **state)
{
	(void)state;
	const char *files[] = {"trustee_tcbinfo_fmspc_00a06d080000.json", "tcb_signing_chain.pem"};
	const char *d = mkcoll(files, 2);
	size_t len = 0;
	uint8_t *q = load("intel-tdx/trustee_quote_6.dat", &len);
	expect_fail(verify(q, len, d, T_QUOTES, NULL, 0, NULL), SL_E_ATTEST_CHAIN, "expired",
	            "trustee TCB info");
	free(q);
	rmcoll(files, 2);
	/* no TCB signing certificate at all */
	const char *f2[] = {"gtg_tcbinfo_fmspc_50806f000000.json"};
	d = mkcoll(f2, 1);
	q = load("intel-tdx/trustee_quote_4.dat", &len);
	expect_fail(verify(q, len, d, T_QUOTES, NULL, 0, NULL), SL_E_ATTEST_UNTRUSTED,
	            "TCB Signing", "no signer");
	free(q);
	rmcoll(f2, 1);
}

static void test_collateral_tamper(void **state)
{
	(void)state;
	const char *d = mkcoll(gtg2023, 3);
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", d, gtg2023[0]);
	uint8_t *b = NULL;
	size_t bl = 0, len = 0;
	assert_int_equal(sl_file_read(p, 1 << 20, &b, &bl), SL_OK);
	char *hit = strstr((char *)b, "\"pcesvn\":11");
	assert_non_null(hit);
	hit[10] = '0'; /* lower a level's PCE SVN inside the signed member */
	assert_int_equal(sl_file_write_atomic(p, b, bl, 0600, true), SL_OK);
	uint8_t *q = load("intel-tdx/trustee_quote_4.dat", &len);
	expect_fail(verify(q, len, d, T_QUOTES, NULL, 0, NULL), SL_E_ATTEST_SIG,
	            "tcbInfo) does not verify", "tampered TCB info");
	hit[10] = '1';
	/* the signature field itself */
	char *sig = strstr((char *)b, "\"signature\":\"");
	assert_non_null(sig);
	sig[13] = sig[13] == '0' ? '1' : '0';
	assert_int_equal(sl_file_write_atomic(p, b, bl, 0600, true), SL_OK);
	expect_fail(verify(q, len, d, T_QUOTES, NULL, 0, NULL), SL_E_ATTEST_SIG, "does not verify",
	            "tampered TCB info signature");
	free(b);
	free(q);
	rmcoll(gtg2023, 3);
}

/* Writes text (n bytes) as the TCB info file of the collateral dir d. */
static void put_tcbinfo(const char *d, const char *text, size_t n)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", d, gtg2023[0]);
	assert_int_equal(sl_file_write_atomic(p, text, n, 0600, true), SL_OK);
}

/* The signed member is cut out by the JSON parser itself: a second
 * "tcbInfo" (last one wins in a lenient parser) behind the signed one, an
 * escaped spelling of the key, or an extra member is refused, and the
 * signed bytes are exactly the member's value as served. */
static void test_collateral_duplicate(void **state)
{
	(void)state;
	const char *d = mkcoll(gtg2023, 3);
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", d, gtg2023[0]);
	uint8_t *b = NULL;
	size_t bl = 0, len = 0;
	assert_int_equal(sl_file_read(p, 1 << 20, &b, &bl), SL_OK);
	char *text = (char *)b;
	uint8_t *q = load("intel-tdx/trustee_quote_4.dat", &len);

	/* the exact signed range: from the '{' after "tcbInfo": to its '}' */
	json_t *body = NULL;
	const uint8_t *sv = NULL;
	size_t svl = 0;
	uint8_t sig[64];
	assert_int_equal(sl_tdx_pcs_parse(b, bl, "tcbInfo", p, &body, &sv, &svl, sig), SL_OK);
	char *sigat = strstr(text, ",\"signature\"");
	assert_non_null(sigat);
	assert_ptr_equal(sv, b + strlen("{\"tcbInfo\":"));
	assert_int_equal(svl, (size_t)(sigat - text) - strlen("{\"tcbInfo\":"));
	assert_string_equal(json_string_value(json_object_get(body, "fmspc")), "50806f000000");
	json_decref(body);

	/* {"tcbInfo": SIGNED, "tcbInfo": TAMPERED, "signature": ...} */
	size_t head = (size_t)(sigat - text);
	size_t mlen = head - strlen("{\"tcbInfo\":");
	char *dup = malloc(bl + mlen + 64);
	size_t n = 0;
	memcpy(dup, text, head);
	n = head;
	n += (size_t)snprintf(dup + n, 16, ",\"tcbInfo\":");
	memcpy(dup + n, text + strlen("{\"tcbInfo\":"), mlen);
	char *hit = strstr(dup + n, "\"pcesvn\":11");
	assert_non_null(hit);
	hit[10] = '0';
	n += mlen;
	memcpy(dup + n, sigat, bl - head);
	n += bl - head;
	put_tcbinfo(d, dup, n);
	expect_fail(verify(q, len, d, T_QUOTES, NULL, 0, NULL), SL_E_ATTEST_FORMAT,
	            "duplicate object key", "second tcbInfo behind the signed one");

	/* the same with the second key spelled with an escape */
	char *k2 = strstr(dup + head, "\"tcbInfo\"");
	assert_non_null(k2);
	char *esc = malloc(n + 8);
	size_t at = (size_t)(k2 - dup);
	memcpy(esc, dup, at);
	memcpy(esc + at, "\"tcb\\u0049nfo\"", 14);
	memcpy(esc + at + 14, dup + at + 9, n - at - 9);
	put_tcbinfo(d, esc, n + 5);
	expect_fail(verify(q, len, d, T_QUOTES, NULL, 0, NULL), SL_E_ATTEST_FORMAT,
	            "duplicate object key", "escaped second tcbInfo");

	/* an extra top-level member */
	memcpy(dup, text, head);
	n = head + (size_t)snprintf(dup + head, 16, ",\"x\":1");
	memcpy(dup + n, sigat, bl - head);
	n += bl - head;
	put_tcbinfo(d, dup, n);
	expect_fail(verify(q, len, d, T_QUOTES, NULL, 0, NULL), SL_E_ATTEST_FORMAT,
	            "unknown field \"x\"", "extra member");

	/* whitespace around the member is not signed, and does not matter */
	n = (size_t)snprintf(dup, 32, "{ \n\t\"tcbInfo\" : ");
	memcpy(dup + n, text + strlen("{\"tcbInfo\":"), mlen);
	n += mlen;
	memcpy(dup + n, sigat, bl - head);
	n += bl - head;
	put_tcbinfo(d, dup, n);
	sl_claims *c = NULL;
	assert_int_equal(verify(q, len, d, T_QUOTES, NULL, 0, &c), SL_OK);
	sl_claims_free(c);

	free(esc);
	free(dup);
	free(b);
	free(q);
	rmcoll(gtg2023, 3);
}

/* README: the CCEL log replays to gtg_cos113_quote_v4's RTMR0..2 (RTMR3 stays zero). */
static void test_ccel(void **state)
{
	(void)state;
	size_t ll = 0, ql = 0, events = 0;
	uint8_t *log = load("intel-tdx/ccel/gtg_cos113_ccel_data.dat", &ll);
	uint8_t *q = load("intel-tdx/gtg_cos113_quote_v4.dat", &ql);
	uint8_t rtmr[4][48];
	sl_tdx_quote tq;
	assert_int_equal(sl_tdx_quote_parse(q, ql, &tq), SL_OK);
	assert_int_equal(sl_tdx_ccel_replay(log, ll, rtmr, &events), SL_OK);
	assert_int_equal(events, 43);
	for (int i = 0; i < 4; i++)
		assert_memory_equal(rtmr[i], tq.body.rtmr[i], 48);
	/* a SHA-384 digest flipped (the first one after the Spec ID event): the
	 * log still parses, but no longer replays to the quote */
	size_t at = 200;
	while (at + 2 < ll && !(log[at] == 0x0c && log[at + 1] == 0x00))
		at++;
	log[at + 2] ^= 1;
	assert_int_equal(sl_tdx_ccel_replay(log, ll, rtmr, &events), SL_OK);
	assert_true(memcmp(rtmr, tq.body.rtmr, sizeof(rtmr)) != 0);
	log[at + 2] ^= 1;
	/* not a crypto-agile log */
	log[32 + 5] ^= 1;
	expect_fail(sl_tdx_ccel_replay(log, ll, rtmr, &events), SL_E_ATTEST_FORMAT,
	            "Spec ID Event03", "spec id");
	log[32 + 5] ^= 1;
	/* cut inside an event */
	expect_fail(sl_tdx_ccel_replay(log, 2000, rtmr, &events), SL_E_ATTEST_FORMAT, "need",
	            "truncated log");
	free(log);
	free(q);
}

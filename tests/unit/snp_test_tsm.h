/* Part of snp_test.c: configfs-tsm path handling on a fake tree (no TEE
 * here), and the auxblob certificate table. */

static void put(const char *dir, const char *name, const void *p, size_t n)
{
	char path[2048];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(sl_file_write_atomic(path, p, n, 0600, true), SL_OK);
}

struct fifo_feed {
	char path[2048];
	const char *vals[2];
};

/* Plays the kernel's generation counter: each open of the FIFO by the reader
 * gets the next value (the pause lets the reader close before the next one). */
static void *feed(void *arg)
{
	struct fifo_feed *f = arg;
	for (int i = 0; i < 2; i++) {
		FILE *w = fopen(f->path, "w");
		if (w == NULL)
			return NULL;
		fputs(f->vals[i], w);
		fclose(w);
		usleep(200 * 1000);
	}
	return NULL;
}

static void test_tsm_fake_tree(void **state)
{
	(void)state;
	char root[] = "/tmp/snptsm.XXXXXX", entry[2048], path[2048];
	uint8_t inblob[64], *out = NULL, *aux = NULL;
	size_t outlen = 0, auxlen = 0;
	const uint8_t fake_report[] = "report bytes";
	assert_non_null(mkdtemp(root));
	for (int i = 0; i < 64; i++)
		inblob[i] = (uint8_t)(0xA0 + i);

	/* an entry the kernel would have populated */
	snprintf(entry, sizeof(entry), "%s/e1", root);
	assert_int_equal(mkdir(entry, 0700), 0);
	put(entry, "provider", "sev_guest\n", 10);
	put(entry, "outblob", fake_report, sizeof(fake_report));
	put(entry, "auxblob", "aux", 3);
	struct fifo_feed f = {.vals = {"7\n", "8\n"}};
	snprintf(f.path, sizeof(f.path), "%s/generation", entry);
	assert_int_equal(mkfifo(f.path, 0600), 0);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, feed, &f), 0);
	assert_int_equal(
	    sl_tsm_entry_report(entry, "sev_guest", inblob, &out, &outlen, &aux, &auxlen), SL_OK);
	pthread_join(th, NULL);
	assert_int_equal(outlen, sizeof(fake_report));
	assert_memory_equal(out, fake_report, outlen);
	assert_int_equal(auxlen, 3);
	free(out);
	free(aux);
	uint8_t *in = NULL;
	size_t inlen = 0;
	snprintf(path, sizeof(path), "%s/inblob", entry);
	assert_int_equal(sl_file_read(path, 1024, &in, &inlen), SL_OK);
	assert_int_equal(inlen, 64);
	assert_memory_equal(in, inblob, 64);
	free(in);

	/* a racing writer: generation moved by two */
	struct fifo_feed g = {.vals = {"7\n", "9\n"}};
	snprintf(g.path, sizeof(g.path), "%s", f.path);
	assert_int_equal(pthread_create(&th, NULL, feed, &g), 0);
	expect_fail(sl_tsm_entry_report(entry, "sev_guest", inblob, &out, &outlen, NULL, NULL),
	            SL_E_ATTEST, "another writer", "generation race");
	pthread_join(th, NULL);
	assert_null(out);
	/* a static generation (nobody wrote): no increment */
	unlink(f.path);
	put(entry, "generation", "5\n", 2);
	expect_fail(sl_tsm_entry_report(entry, "sev_guest", inblob, &out, &outlen, NULL, NULL),
	            SL_E_ATTEST, "from 5 to 5", "generation static");
	/* the wrong provider (a TDX guest) */
	expect_fail(sl_tsm_entry_report(entry, "tdx_guest", inblob, &out, &outlen, NULL, NULL),
	            SL_E_ATTEST, "provider is 'sev_guest'", "provider");
	/* no outblob */
	snprintf(path, sizeof(path), "%s/outblob", entry);
	unlink(path);
	put(entry, "generation", "x\n", 2);
	expect_fail(sl_tsm_entry_report(entry, "sev_guest", inblob, &out, &outlen, NULL, NULL),
	            SL_E_ATTEST, "generation: not a number", "bad generation");
	/* the whole sequence on an empty new entry: fails on provider, removes it */
	expect_fail(sl_tsm_report(root, "sev_guest", inblob, &out, &outlen, NULL, NULL),
	            SL_E_ATTEST, "provider", "fresh entry");
	/* root missing */
	snprintf(path, sizeof(path), "%s/missing", root);
	expect_fail(sl_tsm_report(path, "sev_guest", inblob, &out, &outlen, NULL, NULL),
	            SL_E_ATTEST, "cannot create", "no configfs");
	/* clean up: the fresh entry must already be gone */
	const char *files[] = {"provider", "auxblob", "inblob", "generation"};
	for (size_t i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s", entry, files[i]);
		unlink(path);
	}
	assert_int_equal(rmdir(entry), 0);
	assert_int_equal(rmdir(root), 0); /* fails if the fresh entry were left behind */
}

static void test_cert_table(void **state)
{
	(void)state;
	/* VCEK GUID 63da758d-e664-4564-adc5-f4b93be8accd in RFC 4122 order, ARK
	 * c0b406a4-a803-4952-9743-3fb6014cd0ae in the mixed-endian form */
	const uint8_t vcek_guid[16] = {0x63, 0xda, 0x75, 0x8d, 0xe6, 0x64, 0x45, 0x64,
	                               0xad, 0xc5, 0xf4, 0xb9, 0x3b, 0xe8, 0xac, 0xcd};
	const uint8_t ark_guid[16] = {0xa4, 0x06, 0xb4, 0xc0, 0x03, 0xa8, 0x52, 0x49,
	                              0x97, 0x43, 0x3f, 0xb6, 0x01, 0x4c, 0xd0, 0xae};
	uint8_t t[200] = {0};
	memcpy(t, vcek_guid, 16);
	t[16] = 72; /* offset */
	t[20] = 5;  /* length */
	memcpy(t + 24, ark_guid, 16);
	t[40] = 77;
	t[44] = 3;
	memcpy(t + 72, "VCEK!ARK", 8);
	json_t *certs = json_object();
	assert_int_equal(sl_snp_cert_table_to_json(t, 80, certs), SL_OK);
	assert_string_equal(json_string_value(json_object_get(certs, "vcek")), "VkNFSyE=");
	assert_string_equal(json_string_value(json_object_get(certs, "ark")), "QVJL");
	/* an entry pointing outside the blob */
	t[44] = 4;
	expect_fail(sl_snp_cert_table_to_json(t, 80, certs), SL_E_ATTEST_FORMAT, "outside",
	            "cert table bounds");
	/* no terminating entry: the blob ends after two entries */
	t[16] = 40;
	t[20] = 8;
	t[40] = 40;
	t[44] = 8;
	expect_fail(sl_snp_cert_table_to_json(t, 48, certs), SL_E_ATTEST_FORMAT, "cert_table.guid",
	            "cert table end");
	json_decref(certs);
}

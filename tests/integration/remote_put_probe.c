/* Test client for uploads (launcher/outputs/remote_upload.c), built by
 * tests/integration/remote_multipart.sh and scripts/bench/70-remote.sh
 * against libseclaunch.a: sl_remote_put of one local file.
 *
 *   remote_put_probe URL OBJECT FILE [CONNECTIONS]
 *     URL: s3://BUCKET/PREFIX/ (with $SECLAUNCH_TEST_S3_ENDPOINT as the
 *     endpoint and $SECLAUNCH_TEST_CA as the CA bundle) or https://…;
 *     the part size comes from SECLAUNCH_REMOTE_PART_SIZE as in seclaunch.
 *     Exits 0, or with the error's exit code after printing its detail. */
#include <curl/curl.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset/remote.h"
#include "seclaunch/secret.h"

int main(int argc, char **argv)
{
	sl_remote_opts o = {0};
	sl_remote *r = NULL;
	struct stat st;
	sl_err rc;

	if (argc < 4) {
		fprintf(stderr, "usage: remote_put_probe URL OBJECT FILE [CONNECTIONS]\n");
		return 1;
	}
	o.ca_file = getenv("SECLAUNCH_TEST_CA");
	o.s3_endpoint = getenv("SECLAUNCH_TEST_S3_ENDPOINT");
	o.connections = argc > 4 ? (unsigned)atoi(argv[4]) : 0;
	o.quiet = true;
	int fd = open(argv[3], O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		perror(argv[3]);
		return 2;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = sl_crypto_init();
	if (rc == SL_OK)
		rc = sl_remote_open(argv[1], &o, &r);
	if (rc == SL_OK)
		rc = sl_remote_put(r, argv[2], fd, (uint64_t)st.st_size);
	if (rc != SL_OK)
		fprintf(stderr, "remote_put_probe: %s\n", sl_err_detail());
	sl_remote_free(r);
	close(fd);
	curl_global_cleanup();
	return rc == SL_OK ? 0 : sl_err_exit_code(rc);
}

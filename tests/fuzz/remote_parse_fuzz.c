/* What remote sources send (launcher/dataset/remote_parse.c): the first byte picks
 * the parser, the rest is its input. Content-Range values, the AWS shared
 * credentials file, the AWS instance metadata credentials JSON, the GCP
 * metadata token JSON, and (launcher/outputs/remote_upload.c) the UploadId and
 * error Code of S3's XML answers and the ETag of an UploadPart. Each returns cleanly on any bytes,
 * and what it accepts satisfies the checked invariants. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../launcher/dataset/remote.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *in = data + 1;
	size_t len = size - 1;
	switch (data[0] % 7) {
	case 0: {
		char v[160];
		uint64_t a, b, t;
		if (len >= sizeof(v))
			len = sizeof(v) - 1;
		memcpy(v, in, len);
		v[len] = '\0';
		if (sl_remote_content_range(v, &a, &b, &t) && !(a <= b && b < t))
			abort();
		break;
	}
	case 1: {
		sl_remote_creds c = {0};
		if (sl_remote_parse_aws_file((const char *)in, len, "default", &c) == SL_OK) {
			if ((c.id != NULL && strlen(c.id) > len) ||
			    (c.secret != NULL && strlen(c.secret) > len))
				abort();
		}
		sl_remote_creds_wipe(&c);
		break;
	}
	case 2: {
		sl_remote_creds c = {0};
		if (sl_remote_parse_imds(in, len, &c) == SL_OK &&
		    (c.id == NULL || c.secret == NULL))
			abort();
		sl_remote_creds_wipe(&c);
		break;
	}
	case 4:
	case 6: {
		char v[64];
		/* what is accepted fits, is not empty, and holds no byte that
		 * would break out of the query or the XML it goes into */
		if (sl_remote_xml_text(in, len, data[0] % 7 == 4 ? "UploadId" : "Code", v,
		                       sizeof(v)) &&
		    (v[0] == '\0' || strlen(v) >= sizeof(v) || strpbrk(v, "<>&\" \r\n") != NULL))
			abort();
		break;
	}
	case 5: {
		char v[160];
		if (len >= sizeof(v))
			len = sizeof(v) - 1;
		memcpy(v, in, len);
		v[len] = '\0';
		if (sl_remote_etag_ok(v) && (strpbrk(v, "<>&\r\n ") != NULL || strlen(v) > 130))
			abort();
		break;
	}
	default: {
		char *t = NULL;
		if (sl_remote_parse_gcp_token(in, len, &t) == SL_OK &&
		    (t == NULL || t[0] == '\0' || strpbrk(t, "\r\n") != NULL))
			abort();
		free(t);
	}
	}
	return 0;
}

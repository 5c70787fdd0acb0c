/* libFuzzer: the SLD v1 header parser and everything that reads a parsed
 * header (accessors, sizes, the inspect JSON), and opening the input as a
 * whole SLD file in memory (sl_sld_open_mem: the header, key check, MAC
 * and size checks over untrusted bytes). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "seclaunch/sld.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static sl_secret *dek;
	sl_sld_header *h = NULL;
	sl_sld_reader *r = NULL;
	if (dek == NULL) {
		if (sl_crypto_init() != SL_OK || sl_secret_new(SL_SLD_DEK_LEN, &dek) != SL_OK)
			abort();
		memset(sl_secret_data(dek), 0x5a, SL_SLD_DEK_LEN);
	}
	/* from memory: a header that parses but was not made with this key is
	 * refused; nothing opens that the parser refuses */
	sl_err orc = sl_sld_open_mem(data, size, "fuzz.sld", dek, &r);
	sl_sld_close(r);
	if (sl_sld_header_parse(data, size, &h) != SL_OK) {
		if (orc == SL_OK)
			abort();
		return 0;
	}
	/* invariants the parser promises */
	size_t hl = sl_sld_header_len(h);
	if (hl > size || memcmp(sl_sld_header_bytes(h), data, hl) != 0)
		abort();
	uint64_t n = sl_sld_header_chunk_count(h);
	uint32_t cs = sl_sld_header_chunk_size(h);
	if (n == 0 || cs < SL_SLD_CHUNK_MIN || cs > SL_SLD_CHUNK_MAX || (cs & (cs - 1)) != 0)
		abort();
	if (sl_sld_chunk_plain_len(h, n - 1) > cs ||
	    (sl_sld_header_plaintext_len(h) > 0 && sl_sld_chunk_plain_len(h, n - 1) == 0))
		abort();
	if (sl_sld_header_file_size(h) != hl + sl_sld_header_plaintext_len(h) + 16 * n)
		abort();
	if (sl_aead_name(sl_sld_header_aead(h)) == NULL)
		abort();
	size_t wl;
	(void)sl_sld_header_wrapped_dek(h, &wl);
	if (strlen(sl_sld_header_dataset_id(h)) == 0 || wl > SL_SLD_WRAPPED_DEK_MAX)
		abort();
	json_t *j = sl_sld_header_json(h);
	if (j != NULL) {
		char *s = json_dumps(j, 0);
		free(s);
		json_decref(j);
	}
	sl_sld_header_free(h);
	return 0;
}

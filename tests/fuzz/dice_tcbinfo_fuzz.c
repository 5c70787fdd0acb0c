/* Fuzz target: the TCG DICE TcbInfo extension of a GPU's attestation
 * certificate, as the standard DiceTcbInfo and as Hopper's own layout. The
 * seeds are the extensions of the real H100 and Blackwell leaves. */
#include <stdint.h>

#include "../../attest/dice_tcbinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sl_dice_tcbinfo t;
	sl_dice_fwid f;
	if (sl_dice_tcbinfo_parse(data, size, &t) == SL_OK) {
		for (size_t i = 0; i < t.nfwids; i++)
			(void)sl_dice_fwid_is_sha384(&t.fwids[i]);
		/* every borrowed field lies inside the input */
		if (t.vendor.p != NULL &&
		    (t.vendor.p < data || t.vendor.p + t.vendor.len > data + size))
			__builtin_trap();
	}
	if (sl_dice_nv_hopper_parse(data, size, &f) == SL_OK)
		(void)sl_dice_fwid_is_sha384(&f);
	(void)sl_dice_is_standard(data, size);
	return 0;
}

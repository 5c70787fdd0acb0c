/* TCG DICE TcbInfo (private to attest/): the certificate extension that
 * names a device layer's firmware (TCG DICE Attestation Architecture,
 * "DiceTcbInfo"), and NVIDIA Hopper's own layout under the same OID.
 *
 *   DiceTcbInfo ::= SEQUENCE {
 *     vendor [0] UTF8String OPTIONAL, model [1] UTF8String OPTIONAL,
 *     version [2] UTF8String OPTIONAL, svn [3] INTEGER OPTIONAL,
 *     layer [4] INTEGER OPTIONAL, index [5] INTEGER OPTIONAL,
 *     fwids [6] SEQUENCE OF FWID OPTIONAL, flags [7] BIT STRING OPTIONAL,
 *     vendorInfo [8] OCTET STRING OPTIONAL, type [9] OCTET STRING OPTIONAL,
 *     flagsMask [10] BIT STRING OPTIONAL, integrityRegisters [11] OPTIONAL }
 *   FWID ::= SEQUENCE { hashAlg OBJECT IDENTIFIER, digest OCTET STRING }
 *
 * (all tags IMPLICIT). The DER is walked through sl_reader; pointers in the
 * parsed structure borrow the caller's buffer. */
#ifndef SECLAUNCH_ATTEST_DICE_TCBINFO_H
#define SECLAUNCH_ATTEST_DICE_TCBINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"

#define SL_DICE_OID_TCBINFO "2.23.133.5.4.1"     /* tcg-dice-TcbInfo (Hopper's layout on H100) */
#define SL_DICE_OID_TCBINFO_1 "2.23.133.5.4.1.1" /* the DiceTcbInfo of Blackwell's leaf */
#define SL_DICE_MAX_FWIDS 8
#define SL_DICE_MAX_DER 4096

typedef struct sl_dice_bytes {
	const uint8_t *p; /* NULL when the field is absent */
	size_t len;
} sl_dice_bytes;

typedef struct sl_dice_fwid {
	sl_dice_bytes alg; /* the OID's content octets */
	sl_dice_bytes digest;
} sl_dice_fwid;

typedef struct sl_dice_tcbinfo {
	sl_dice_bytes vendor, model, version;
	bool has_svn, has_layer, has_index;
	uint64_t svn, layer, index;
	sl_dice_fwid fwids[SL_DICE_MAX_FWIDS];
	size_t nfwids;
	sl_dice_bytes flags, vendor_info, type,
	    flags_mask; /* BIT STRINGs with their unused-bits octet */
} sl_dice_tcbinfo;

/* The standard DiceTcbInfo: each field at most once, in tag order, DER
 * lengths minimal, nothing after the SEQUENCE. */
SL_MUST_USE sl_err sl_dice_tcbinfo_parse(const uint8_t *der, size_t len, sl_dice_tcbinfo *t);
/* H100's 2.23.133.5.4.1: SEQUENCE { INTEGER version, SEQUENCE (a public key),
 * FWID }; the FWID comes back in *fwid. */
SL_MUST_USE sl_err sl_dice_nv_hopper_parse(const uint8_t *der, size_t len, sl_dice_fwid *fwid);
/* True when the SEQUENCE's first element is context-tagged (the standard
 * layout) rather than Hopper's INTEGER. */
bool sl_dice_is_standard(const uint8_t *der, size_t len);
/* FWID's hashAlg is SHA-384 (2.16.840.1.101.3.4.2.2) with a 48-byte digest. */
bool sl_dice_fwid_is_sha384(const sl_dice_fwid *f);

#endif

/* Kept for tests written against it: expect_fail is in tests/testlib/testlib.h. */
#include "testlib.h"

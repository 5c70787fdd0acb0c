# seclaunch build. `make` builds bin/seclaunch and bin/seclaunchd.
# Every .c under crypto/ attest/ policy/ audit/ kms/ launcher/ goes into one
# static library, except the program entries launcher/main.c and kms/main.c.

PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build
BIN     ?= bin
HARDEN  ?= 1
SAN     ?= 0
CC      ?= cc

PKGS := libsodium libcrypto tss2-esys tss2-mu tss2-rc tss2-tctildr libcurl jansson libmicrohttpd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null)

# Messages are bounded buffers on purpose, so truncation warnings are off.
WARN := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wimplicit-fallthrough \
	-Wno-missing-field-initializers
ifneq ($(findstring clang,$(CC)),clang)
WARN += -Wno-format-truncation
endif
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -Iinclude -g $(WARN) $(PKG_CFLAGS)

ifeq ($(HARDEN),1)
HARDEN_CFLAGS := -O2 -D_FORTIFY_SOURCE=3 -fstack-protector-strong \
	-fstack-clash-protection -fcf-protection -fPIE
HARDEN_LDFLAGS := -pie -Wl,-z,relro,-z,now,-z,noexecstack
else
HARDEN_CFLAGS := -O2 -fPIE
HARDEN_LDFLAGS := -pie
endif

ifeq ($(SAN),1)
# _FORTIFY_SOURCE and ASan do not mix; the sanitizers check more anyway.
HARDEN_CFLAGS := -O1 -fno-omit-frame-pointer -fPIE -fsanitize=address,undefined \
	-fno-sanitize-recover=undefined
HARDEN_LDFLAGS := -pie -fsanitize=address,undefined
endif

ifeq ($(SAN),fuzz)
# libFuzzer builds (scripts/run-fuzz): library instrumented, no main.
# Warnings are the normal build's job (gcc, -Werror); clang's extra ones do not stop fuzzing.
HARDEN_CFLAGS := -O1 -fno-omit-frame-pointer -fPIE -fsanitize=fuzzer-no-link,address,undefined \
	-Wno-error
HARDEN_LDFLAGS := -fsanitize=fuzzer,address,undefined
endif

CFLAGS  ?=
LDFLAGS ?=
ALL_CFLAGS  := $(CFLAGS_BASE) $(HARDEN_CFLAGS) $(CFLAGS)
ALL_LDFLAGS := $(HARDEN_LDFLAGS) $(LDFLAGS)
LIBS := $(PKG_LIBS) -lpthread -ldl -lm

MODULES := crypto attest policy audit kms launcher
MAINS   := launcher/main.c kms/main.c
LIB_SRCS := $(filter-out $(MAINS),$(foreach m,$(MODULES),$(wildcard $(m)/*.c)))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libseclaunch.a

UNIT_SRCS  := $(wildcard tests/unit/*_test.c)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
FUZZ_SRCS  := $(wildcard tests/fuzz/*_fuzz.c)

PROGS := $(BIN)/seclaunch $(if $(wildcard kms/main.c),$(BIN)/seclaunchd)

.PHONY: print-flags print-libs all deps check unit-build asan fuzz lint bench demo install uninstall clean stress
.DELETE_ON_ERROR:

all: $(PROGS)

deps:
	@scripts/install-deps

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(BIN)/seclaunch: $(BUILD)/launcher/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BIN)/seclaunchd: $(BUILD)/kms/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/tests/%_test: tests/unit/%_test.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LIB) $(CMOCKA_LIBS) $(LIBS)

unit-build: $(UNIT_BINS)

# Every test: unit tests (cmocka) then integration scripts against real
# swtpm / SoftHSM2 / seclaunchd on loopback. Prints "N passed, N failed".
check: deps
	@$(MAKE) --no-print-directory all unit-build
	@BUILD=$(BUILD) BIN=$(BIN) scripts/run-tests $(TESTS)

# The long tests (tests/stress/: connection exhaustion at full scale,
# SIGTERM races); a few minutes on two cores.
stress: deps all
	@BUILD=$(BUILD) BIN=$(BIN) scripts/run-stress $(TESTS)

asan: deps
	@$(MAKE) --no-print-directory SAN=1 BUILD=build/asan BIN=build/asan/bin all unit-build
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		BUILD=build/asan BIN=build/asan/bin scripts/run-tests $(TESTS)

FUZZ_TIME ?= 15
fuzz: deps
	@scripts/run-fuzz $(FUZZ_TIME) $(FUZZ_SRCS)

lint: deps
	@scripts/lint

bench: deps all
	@scripts/run-bench

demo: deps all
	@scripts/demo

install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(PROGS) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/share/seclaunch/python
	install -m 0644 $(wildcard launcher/python/*.py) $(DESTDIR)$(PREFIX)/share/seclaunch/python/ 2>/dev/null || true

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/seclaunch $(DESTDIR)$(PREFIX)/bin/seclaunchd
	rm -rf $(DESTDIR)$(PREFIX)/share/seclaunch

clean:
	rm -rf build bin

-include $(LIB_OBJS:.o=.d) $(BUILD)/launcher/main.d $(BUILD)/kms/main.d

# For scripts: the compile flags and link libraries in force.
print-flags:
	@echo $(ALL_CFLAGS)
print-libs:
	@echo $(LIBS)

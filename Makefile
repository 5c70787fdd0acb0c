# seclaunch build. `make` builds bin/seclaunch and bin/seclaunchd.
# Every .c under core/ crypto/ attest/ policy/ audit/ kms/ launcher/ (and one
# folder below: kms/daemon/ kms/http/ kms/keys/ kms/state/) goes into one static
# library, except the program entries launcher/main.c and kms/daemon/main.c
# and launcher/slurm/ (the SPANK plugin).

PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build
BIN     ?= bin
HARDEN  ?= 1
SAN     ?= 0
CC      ?= cc

PKG_CONFIG   ?= pkg-config
INSTALL_DEPS ?= scripts/install-deps

# The pkg-config modules the build needs. p11-kit-1 gives only the PKCS#11
# header (kms/keys/pkcs11.c dlopens the token's module), so it adds no library.
PKGS      := libsodium libcrypto tss2-esys tss2-mu tss2-rc tss2-tctildr libcurl jansson \
	libmicrohttpd p11-kit-1 sqlite3 libpq libcbor
PKGS_HDR  := p11-kit-1
TEST_PKGS := cmocka

# The Debian package that provides each module (scripts/install-deps installs
# every one; tests/integration/bootstrap.sh checks that it does).
DEB.pkg-config    := pkg-config
DEB.libsodium     := libsodium-dev
DEB.libcrypto     := libssl-dev
DEB.tss2-esys     := libtss2-dev
DEB.tss2-mu       := libtss2-dev
DEB.tss2-rc       := libtss2-dev
DEB.tss2-tctildr  := libtss2-dev
DEB.libcurl       := libcurl4-openssl-dev
DEB.jansson       := libjansson-dev
DEB.libmicrohttpd := libmicrohttpd-dev
DEB.p11-kit-1     := libp11-kit-dev
DEB.sqlite3       := libsqlite3-dev
DEB.libpq         := libpq-dev
DEB.libcbor       := libcbor-dev
DEB.cmocka        := libcmocka-dev

# pkg-config runs when a flag is first needed, once, never while the Makefile
# is read: the entry targets below install the packages before a second make
# asks for flags. A module still missing then stops make with one line that
# names it and its Debian package, before anything compiles.
pkg_missing = $(strip $(if $(shell command -v $(PKG_CONFIG)),$(shell $(PKG_CONFIG) --exists $(1) \
	|| for m in $(1); do $(PKG_CONFIG) --exists $$m || echo $$m; done),pkg-config))
pkg_need = $(call pkg_stop,$(call pkg_missing,$(1)))
pkg_stop = $(if $(1),$(error missing $(if $(filter pkg-config,$(1)),program,pkg-config \
	module$(if $(word 2,$(1)),s)) $(1) (Debian package$(if $(word 2,$(1)),s) $(call deb_of,$(1))): \
	apt-get install $(call deb_of,$(1)), or make deps))
deb_of = $(sort $(foreach m,$(1),$(or $(DEB.$(m)),unknown)))
pkg_flags = $(call pkg_need,$(1))$(shell $(PKG_CONFIG) $(2) $(1))

PKG_CFLAGS  = $(eval PKG_CFLAGS := $(call pkg_flags,$(PKGS),--cflags))$(PKG_CFLAGS)
PKG_LIBS    = $(eval PKG_LIBS := $(call pkg_flags,$(filter-out $(PKGS_HDR),$(PKGS)),--libs))$(PKG_LIBS)
CMOCKA_CFLAGS = $(eval CMOCKA_CFLAGS := $(call pkg_flags,$(TEST_PKGS),--cflags))$(CMOCKA_CFLAGS)
CMOCKA_LIBS   = $(eval CMOCKA_LIBS := $(call pkg_flags,$(TEST_PKGS),--libs))$(CMOCKA_LIBS)

# Messages are bounded buffers on purpose, so truncation warnings are off.
WARN := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wimplicit-fallthrough \
	-Wno-missing-field-initializers
ifneq ($(findstring clang,$(CC)),clang)
WARN += -Wno-format-truncation
endif
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Iinclude -g $(WARN) $(PKG_CFLAGS)

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
ALL_CFLAGS  = $(CFLAGS_BASE) $(HARDEN_CFLAGS) $(CFLAGS)
ALL_LDFLAGS = $(HARDEN_LDFLAGS) $(LDFLAGS)
LIBS = $(PKG_LIBS) -lpthread -ldl -lm

MODULES := core crypto attest policy audit kms launcher
MAINS   := launcher/main.c kms/daemon/main.c
# Sources below a module that are not library code: the SPANK plugin (its own rule).
NOT_LIB := launcher/slurm/%
LIB_SRCS := $(filter-out $(MAINS) $(NOT_LIB),$(foreach m,$(MODULES),$(wildcard $(m)/*.c $(m)/*/*.c)))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libseclaunch.a

UNIT_SRCS  := $(wildcard tests/unit/*_test.c)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
FUZZ_SRCS  := $(wildcard tests/fuzz/*_fuzz.c)
TESTLIB    := $(BUILD)/tests/testlib.o
TEST_CFLAGS = -Itests/testlib $(CMOCKA_CFLAGS)

PROGS := $(BIN)/seclaunch $(if $(wildcard kms/daemon/main.c),$(BIN)/seclaunchd)

# The Slurm SPANK plugin (launcher/slurm/), built where Slurm's headers are
# (libslurm-dev); installed in Slurm's plugin folder.
SPANK_H      ?= /usr/include/slurm/spank.h
SPANK_SO     := $(if $(wildcard $(SPANK_H)),$(BUILD)/slurm/spank_seclaunch.so)
# asked of the compiler only when installing (never while deps runs)
MULTIARCH     = $(shell $(CC) -print-multiarch 2>/dev/null)
SLURM_PLUGINDIR ?= $(PREFIX)/lib/$(MULTIARCH)/slurm-wlm
# The job-side library (jobside/): loaded into the job's process, so built
# as a plain hardened shared object whatever SAN says. The AES-256-GCM
# kernel is built to PTX when nvcc exists (no GPU is needed for that);
# without it, --gpu-decrypt says the kernel is missing.
JOBSIDE_SO  := $(BUILD)/jobside/libseclaunch_data.so
JOBSIDE_PTX := $(BUILD)/jobside/gcm_kernel.ptx
NVCC ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
NVCC_ARCH ?= compute_75
JOBSIDE_CFLAGS = -std=c11 -D_GNU_SOURCE -g -O2 $(WARN) -fPIC -fvisibility=hidden \
	-D_FORTIFY_SOURCE=3 -fstack-protector-strong -fstack-clash-protection -Ijobside \
	$(shell $(PKG_CONFIG) --cflags jansson 2>/dev/null)
JOBSIDE_LDFLAGS = -shared -Wl,-z,relro,-z,now,-z,noexecstack -Wl,-soname,libseclaunch_data.so
# A CPU stand-in for libcuda.so.1, for tests only (tests/fakecuda/fakecuda.c).
FAKECUDA := $(BUILD)/tests/fakecuda/libcuda.so.1
# A stand-in for libnvidia-ml.so.1: CC settings and N GPUs' signed reports
# (tests/fakecuda/fakenvml.c).
FAKENVML := $(BUILD)/tests/fakecuda/libnvidia-ml.so.1
# Test copies of the programs that also pin the fake NVML's test GPU root
# (tests/fakecuda/nvgpu_testroot.c; attest/nvgpu_int.h says why only there).
NVGPU_TESTROOT := $(BUILD)/tests/nvgpu-testroot
NVGPU_TEST_PROGS := $(NVGPU_TESTROOT)/seclaunch $(if $(wildcard kms/daemon/main.c),$(NVGPU_TESTROOT)/seclaunchd)

.PHONY: print-flags print-libs print-pkgs print-test-pkgs all deps build build-tests check unit-build asan fuzz \
	lint bench demo install uninstall clean stress
.DELETE_ON_ERROR:

# Plain `make` installs nothing: with the packages present it builds; without
# them it stops with the one line above.
all: $(PROGS) $(JOBSIDE_SO) $(if $(NVCC),$(JOBSIDE_PTX)) $(SPANK_SO)

# Entry targets (demo, check, bench, asan, fuzz, lint) run deps first and then
# a second make, so that pkg-config is asked only after the packages are in
# place, and with -j nothing compiles while deps runs. `build` and
# `build-tests` run that second make once, whichever entry targets need it.
deps:
	@$(INSTALL_DEPS)

build: deps
	$(call pkg_need,$(PKGS))@+$(MAKE) --no-print-directory all

build-tests: build
	$(call pkg_need,$(TEST_PKGS))@+$(MAKE) --no-print-directory unit-build

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

$(BIN)/seclaunch: $(BUILD)/launcher/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BIN)/seclaunchd: $(BUILD)/kms/daemon/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

# Loaded into slurmstepd: a plain hardened shared object whatever SAN says.
# Its object stays in $(BUILD)/launcher/slurm/ for scripts/check-layers.
$(BUILD)/launcher/slurm/spank_seclaunch.o: launcher/slurm/spank_seclaunch.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -g -O2 $(WARN) -fPIC -D_FORTIFY_SOURCE=3 \
		-fstack-protector-strong -fstack-clash-protection -fcf-protection -MMD -MP \
		-Iinclude -c -o $@ $<

$(BUILD)/slurm/spank_seclaunch.so: $(BUILD)/launcher/slurm/spank_seclaunch.o
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-z,relro,-z,now,-z,noexecstack -o $@ $< -ljansson

$(JOBSIDE_SO): jobside/seclaunch_data.c jobside/seclaunch_data.h crypto/gcm_arith.h \
		include/seclaunch/cuda_api.h
	@mkdir -p $(dir $@)
	$(CC) $(JOBSIDE_CFLAGS) $(JOBSIDE_LDFLAGS) -o $@ $< -ljansson -ldl

# A toolkit that cannot compile (host compiler too new, say) does not fail
# the build: --gpu-decrypt then says the kernel is missing.
$(JOBSIDE_PTX): jobside/gcm_kernel.cu crypto/gcm_arith.h
	@mkdir -p $(dir $@)
	$(NVCC) --ptx -O3 -arch=$(NVCC_ARCH) -o $@ $< || { rm -f $@; \
		echo "warning: $(NVCC) failed: no $@, so no GPU decryption (--gpu-decrypt)" >&2; }

$(FAKECUDA): tests/fakecuda/fakecuda.c crypto/gcm_arith.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -g -O2 $(WARN) -fPIC -fvisibility=hidden -shared \
		-Wl,-soname,libcuda.so.1 -o $@ $< -lpthread

$(FAKENVML): tests/fakecuda/fakenvml.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -g -O2 $(WARN) -fPIC -fvisibility=hidden -shared \
		-Wl,-soname,libnvidia-ml.so.1 -o $@ $< -lcrypto

$(NVGPU_TESTROOT)/seclaunch: $(BUILD)/launcher/main.o $(BUILD)/tests/fakecuda/nvgpu_testroot.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(NVGPU_TESTROOT)/seclaunchd: $(BUILD)/kms/daemon/main.o $(BUILD)/tests/fakecuda/nvgpu_testroot.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

# Unit tests: cmocka, the shared helpers of tests/testlib/ linked into each.
$(TESTLIB): tests/testlib/testlib.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(TEST_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/%_test: tests/unit/%_test.c $(TESTLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(TEST_CFLAGS) $(ALL_LDFLAGS) -MMD -MP -o $@ $< $(TESTLIB) $(LIB) \
		$(CMOCKA_LIBS) $(LIBS)

# scripts/gpu-check's and scripts/bench/70-gpu.sh's measuring tool (not a unit test).
GPU_CHECK := $(BUILD)/tests/gpu_check
$(GPU_CHECK): tests/gpu/gpu_check.c jobside/seclaunch_data.h crypto/gcm_arith.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -MMD -MP -o $@ $< $(LIB) $(LIBS)

unit-build: $(UNIT_BINS) $(FAKECUDA) $(FAKENVML) $(NVGPU_TEST_PROGS) $(JOBSIDE_SO) $(GPU_CHECK)

# Every test: unit tests (cmocka) then integration scripts against real
# swtpm / SoftHSM2 / seclaunchd on loopback. Prints "N passed, N failed".
check: build-tests
	@BUILD=$(BUILD) BIN=$(BIN) scripts/run-tests $(TESTS)

# The long tests (tests/stress/: connection exhaustion at full scale,
# SIGTERM races); a few minutes on two cores.
stress: build
	@BUILD=$(BUILD) BIN=$(BIN) scripts/run-stress $(TESTS)

asan: deps
	$(call pkg_need,$(PKGS) $(TEST_PKGS))@+$(MAKE) --no-print-directory SAN=1 BUILD=build/asan \
		BIN=build/asan/bin all unit-build
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		BUILD=build/asan BIN=build/asan/bin scripts/run-tests $(TESTS)

FUZZ_TIME ?= 15
fuzz: deps
	$(call pkg_need,$(PKGS))@+scripts/run-fuzz $(FUZZ_TIME) $(FUZZ_SRCS)

lint: deps
	@scripts/lint

bench: build
	@+$(MAKE) --no-print-directory $(GPU_CHECK)
	@scripts/run-bench

demo: build
	@scripts/demo

# Installation, man pages, shell completion and the Debian package. The man
# pages and the completion are generated from the built programs' --help
# (help2man, scripts/docgen), so they cannot drift from them.
PYTHON ?= python3
# Where the Python helper goes: the directory under PREFIX that $(PYTHON)
# actually imports from (dist-packages on Debian), else its sysconfig purelib.
PYTHON_SITE ?= $(shell $(PYTHON) scripts/pysite $(PREFIX))
MANDIR ?= $(PREFIX)/share/man
# The documents the man pages and --help name as docs/NAME.md.
DOCDIR ?= $(PREFIX)/share/doc/seclaunch
DOCS := $(wildcard docs/*.md) README.md SECURITY.md
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
MAN_PAGES := $(BUILD)/man/seclaunch.1 $(BUILD)/man/seclaunchd.8 $(BUILD)/man/seclaunchd.conf.5
COMPLETION := $(BUILD)/completion/seclaunch
DEB_OUT ?= $(BUILD)/deb

.PHONY: man completion deb

man: $(MAN_PAGES)
completion: $(COMPLETION)

# help2man runs each program through `docgen usage-filter`, which hands it a
# usage of several lines in the form it reads ("Usage: ..." then "or: ...").
$(BUILD)/man/wrap/%: $(BIN)/% scripts/docgen
	@mkdir -p $(dir $@)
	printf '#!/bin/sh\nexec $(PYTHON) $(CURDIR)/scripts/docgen usage-filter $(abspath $<) "$$@"\n' >$@
	chmod +x $@

$(BUILD)/man/seclaunch.1: $(BUILD)/man/wrap/seclaunch docs/man/seclaunch.h2m scripts/docgen
	$(PYTHON) scripts/docgen commands $(BIN)/seclaunch >$(BUILD)/man/commands.h2m
	help2man --no-info --section=1 --source="seclaunch $(SL_VERSION)" \
		--name="run training jobs on datasets whose keys only attested machines receive" \
		--include=docs/man/seclaunch.h2m --include=$(BUILD)/man/commands.h2m \
		--output=$@ $<

$(BUILD)/man/seclaunchd.8: $(BUILD)/man/wrap/seclaunchd docs/man/seclaunchd.h2m
	help2man --no-info --section=8 --source="seclaunch $(SL_VERSION)" \
		--manual="System Administration" --name="the attested key-release service" \
		--include=docs/man/seclaunchd.h2m --output=$@ $<

$(BUILD)/man/seclaunchd.conf.5: docs/man/seclaunchd.conf scripts/docgen
	@mkdir -p $(dir $@)
	$(PYTHON) scripts/docgen conf $< $(SL_VERSION) >$@

$(COMPLETION): $(PROGS) scripts/docgen
	@mkdir -p $(dir $@)
	$(PYTHON) scripts/docgen completion $(BIN)/seclaunch $(BIN)/seclaunchd >$@

SL_VERSION := $(shell sed -n 's/^\#define SL_VERSION "\(.*\)"/\1/p' include/seclaunch/util.h)

install: all man completion
	@test -n "$(PYTHON_SITE)" || { echo "install: no Python site directory under $(PREFIX) (set PYTHON_SITE=DIR)" >&2; exit 1; }
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PYTHON_SITE) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(BASHCOMPDIR)
	install -m 0755 $(PROGS) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 jobside/python/seclaunch_data.py $(DESTDIR)$(PYTHON_SITE)/
	install -d $(DESTDIR)$(PREFIX)/lib/seclaunch $(DESTDIR)$(PREFIX)/include
	install -m 0644 $(JOBSIDE_SO) $(DESTDIR)$(PREFIX)/lib/seclaunch/
	if [ -f $(JOBSIDE_PTX) ]; then install -m 0644 $(JOBSIDE_PTX) $(DESTDIR)$(PREFIX)/lib/seclaunch/; fi
	install -m 0644 jobside/seclaunch_data.h $(DESTDIR)$(PREFIX)/include/
	install -m 0644 $(BUILD)/man/seclaunch.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(BUILD)/man/seclaunchd.conf.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 $(BUILD)/man/seclaunchd.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 $(COMPLETION) $(DESTDIR)$(BASHCOMPDIR)/seclaunch
	install -d $(DESTDIR)$(DOCDIR)
	install -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)/
	ln -sf seclaunch $(DESTDIR)$(BASHCOMPDIR)/seclaunchd
	$(if $(SPANK_SO),install -D -m 0644 $(SPANK_SO) $(DESTDIR)$(SLURM_PLUGINDIR)/spank_seclaunch.so)
	$(if $(SPANK_SO),install -D -m 0644 docs/slurm/plugstack-seclaunch.conf \
		$(DESTDIR)$(PREFIX)/share/doc/seclaunch/examples/plugstack.conf.d/seclaunch.conf)
	@echo "install: the Python helper is in $(PYTHON_SITE) ($(PYTHON) -c 'import seclaunch_data')"

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/seclaunch $(DESTDIR)$(PREFIX)/bin/seclaunchd
	rm -f $(DESTDIR)$(PYTHON_SITE)/seclaunch_data.py
	rm -f $(DESTDIR)$(PREFIX)/lib/seclaunch/libseclaunch_data.so \
		$(DESTDIR)$(PREFIX)/lib/seclaunch/gcm_kernel.ptx $(DESTDIR)$(PREFIX)/include/seclaunch_data.h
	-rmdir $(DESTDIR)$(PREFIX)/lib/seclaunch 2>/dev/null
	rm -f $(DESTDIR)$(MANDIR)/man1/seclaunch.1 $(DESTDIR)$(MANDIR)/man5/seclaunchd.conf.5 \
		$(DESTDIR)$(MANDIR)/man8/seclaunchd.8
	rm -f $(DESTDIR)$(BASHCOMPDIR)/seclaunch $(DESTDIR)$(BASHCOMPDIR)/seclaunchd
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(DOCS)))
	rm -f $(DESTDIR)$(SLURM_PLUGINDIR)/spank_seclaunch.so \
		$(DESTDIR)$(PREFIX)/share/doc/seclaunch/examples/plugstack.conf.d/seclaunch.conf
	-rmdir $(DESTDIR)$(PREFIX)/share/doc/seclaunch/examples/plugstack.conf.d \
		$(DESTDIR)$(PREFIX)/share/doc/seclaunch/examples $(DESTDIR)$(PREFIX)/share/doc/seclaunch \
		2>/dev/null
	rm -rf $(DESTDIR)$(PREFIX)/share/seclaunch

# seclaunch_VERSION_amd64.deb in $(DEB_OUT), built by debhelper from debian/
# (the programs are those `make` builds here, reused when up to date).
deb: all
	@scripts/build-deb $(DEB_OUT)

clean:
	rm -rf build bin

-include $(LIB_OBJS:.o=.d) $(BUILD)/launcher/main.d $(BUILD)/kms/daemon/main.d $(TESTLIB:.o=.d) \
	$(UNIT_BINS:=.d) $(if $(SPANK_SO),$(BUILD)/launcher/slurm/spank_seclaunch.d)

# For scripts: the compile flags and link libraries in force.
print-flags:
	@echo $(ALL_CFLAGS)
print-libs:
	@echo $(LIBS)
print-pkgs:
	@echo $(PKGS)
print-test-pkgs:
	@echo $(TEST_PKGS)
print-deb-%:
	@echo $(or $(DEB.$*),unknown)

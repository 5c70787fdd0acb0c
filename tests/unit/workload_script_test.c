/* Which script an interpreter reads (launcher/run/workload_script.c): a table
 * of command lines of python3, bash/sh/dash, perl, ruby, node, zsh and
 * Rscript, with the script each one really opens, or "unknown" where it
 * cannot be told. Among them the two attacks that measured the wrong file:
 * `python3 --check-hash-based-pycs always evil.py` (./always was measured)
 * and `bash -o posix evil.sh` (./posix was measured). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../launcher/run/workload_int.h"

#define MAXA 12
#define U SL_WL_SCRIPT_UNKNOWN
#define F SL_WL_SCRIPT_FILE
#define N SL_WL_SCRIPT_NONE

struct tcase {
	const char *argv[MAXA];
	sl_wl_script_kind want;
	const char *script; /* F: the argument that is the script */
	const char *why;    /* U: a piece of the reason */
};

static const struct tcase cases[] = {
    /* python */
    {{"python3", "train.py", "--epochs=3"}, F, "train.py", NULL},
    {{"python3", "--check-hash-based-pycs", "always", "evil.py"}, F, "evil.py", NULL},
    {{"python3", "--check-hash-based-pycs=always", "evil.py"}, F, "evil.py", NULL},
    {{"python3", "-X", "importtime", "evil.py"}, F, "evil.py", NULL},
    {{"python3", "-Ximporttime", "evil.py"}, F, "evil.py", NULL},
    {{"python3", "-W", "ignore", "evil.py"}, F, "evil.py", NULL},
    {{"python3", "-Wignore::DeprecationWarning", "evil.py"}, F, "evil.py", NULL},
    {{"python3", "-uOB", "-X", "dev", "evil.py", "x"}, F, "evil.py", NULL},
    {{"python3", "-u", "--", "evil.py"}, F, "evil.py", NULL},
    {{"python3", "-uOc", "print(1)", "good.py"}, U, NULL, "-c runs code"},
    {{"python3", "-cprint(1)", "good.py"}, U, NULL, "-c runs code"},
    {{"python3", "-m", "torch.distributed.run", "train.py"}, U, NULL, "-m runs a module"},
    {{"python3", "-i", "good.py"}, U, NULL, "-i reads"},
    {{"python3", "-", "good.py"}, U, NULL, "'-'"},
    {{"python3", "--", "-"}, U, NULL, "'-'"},
    {{"python3"}, U, NULL, "no script"},
    {{"python3", "-u"}, U, NULL, "no script"},
    {{"python3", "-X"}, U, NULL, "lacks its argument"},
    {{"python3", "-X", "pycache_prefix=/tmp/x", "good.py"}, U, NULL, "pycache_prefix"},
    {{"python3", "-W", "ignore::evil.Warning", "good.py"}, U, NULL, "module to import"},
    {{"python3", "--frobnicate", "good.py"}, U, NULL, "--frobnicate is not one"},
    {{"python3", "-J", "good.py"}, U, NULL, "-J is not one"},
    {{"python3", "--version"}, U, NULL, "prints and exits"},
    {{"/usr/bin/python3.12", "train.py"}, F, "train.py", NULL},
    {{"pypy3", "-O", "train.py"}, F, "train.py", NULL},
    /* bash, sh, dash */
    {{"bash", "job.sh", "a"}, F, "job.sh", NULL},
    {{"bash", "-o", "posix", "evil.sh"}, F, "evil.sh", NULL},
    {{"bash", "-eo", "pipefail", "evil.sh"}, F, "evil.sh", NULL},
    {{"bash", "-oo", "posix", "errexit", "evil.sh"}, F, "evil.sh", NULL},
    {{"bash", "+o", "posix", "evil.sh"}, F, "evil.sh", NULL},
    {{"bash", "-O", "globstar", "evil.sh"}, F, "evil.sh", NULL},
    {{"bash", "--norc", "--posix", "-eux", "evil.sh"}, F, "evil.sh", NULL},
    {{"bash", "-posix", "evil.sh"}, F, "evil.sh", NULL},
    {{"bash", "--rcfile", "rc", "evil.sh"}, F, "evil.sh", NULL},
    {{"bash", "-", "evil.sh"}, F, "evil.sh", NULL},
    {{"bash", "-e", "--", "evil.sh"}, F, "evil.sh", NULL},
    {{"bash", "-c", "echo", "good.sh"}, U, NULL, "-c runs code"},
    {{"bash", "-ec", "echo"}, U, NULL, "-c runs code"},
    {{"bash", "-s", "good.sh"}, U, NULL, "-s reads commands from standard input"},
    {{"bash", "-i", "good.sh"}, U, NULL, "-i is interactive"},
    {{"bash", "-l", "good.sh"}, U, NULL, "login shell"},
    {{"bash", "--login", "good.sh"}, U, NULL, "login shell"},
    {{"bash", "-O", "extdebug", "good.sh"}, U, NULL, "extdebug"},
    {{"bash", "--debugger", "good.sh"}, U, NULL, "debugger"},
    {{"bash", "--rcfile=rc", "good.sh"}, U, NULL, "next argument"},
    {{"bash", "-o"}, U, NULL, "lacks its argument"},
    {{"bash"}, U, NULL, "no script"},
    {{"/bin/sh", "-e", "job.sh"}, F, "job.sh", NULL},
    {{"sh", "-o", "posix", "evil.sh"}, F, "evil.sh", NULL},
    {{"sh", "-posix", "errexit", "good.sh"}, U, NULL, "to dash"},
    {{"dash", "-ex", "job.sh"}, F, "job.sh", NULL},
    {{"dash", "--posix", "job.sh"}, U, NULL, "--posix is not one"},
    /* perl */
    {{"perl", "train.pl"}, F, "train.pl", NULL},
    {{"perl", "-w", "-I", "lib", "evil.pl"}, F, "evil.pl", NULL},
    {{"perl", "-Ilib", "-T", "evil.pl"}, F, "evil.pl", NULL},
    {{"perl", "-0777", "-ln", "evil.pl"}, F, "evil.pl", NULL},
    {{"perl", "-i.bak", "-p", "evil.pl", "f"}, F, "evil.pl", NULL},
    {{"perl", "-CSD", "evil.pl"}, F, "evil.pl", NULL},
    {{"perl", "-lane", "print", "good.pl"}, U, NULL, "-e runs code"},
    {{"perl", "-e", "print 1", "good.pl"}, U, NULL, "-e runs code"},
    {{"perl", "-MEvil", "good.pl"}, U, NULL, "-M loads a module"},
    {{"perl", "-d", "good.pl"}, U, NULL, "debugger"},
    {{"perl", "-S", "good.pl"}, U, NULL, "PATH"},
    {{"perl", "-xdir", "good.pl"}, U, NULL, "directory"},
    {{"perl", "--help"}, U, NULL, "--help is not one"},
    {{"perl", "-"}, U, NULL, "'-'"},
    /* ruby */
    {{"ruby", "train.rb"}, F, "train.rb", NULL},
    {{"ruby", "-w", "-E", "UTF-8", "evil.rb"}, F, "evil.rb", NULL},
    {{"ruby", "-I", "lib", "evil.rb"}, F, "evil.rb", NULL},
    {{"ruby", "--enable", "frozen-string-literal", "evil.rb"}, F, "evil.rb", NULL},
    {{"ruby", "--disable-gems", "--yjit", "evil.rb"}, F, "evil.rb", NULL},
    {{"ruby", "-W2", "evil.rb"}, F, "evil.rb", NULL},
    {{"ruby", "-W:no-deprecated", "evil.rb"}, F, "evil.rb", NULL},
    {{"ruby", "-W2e", "code", "good.rb"}, U, NULL, "-W"},
    {{"ruby", "-rEvil", "good.rb"}, U, NULL, "-r loads a library"},
    {{"ruby", "-e", "p 1"}, U, NULL, "-e runs code"},
    {{"ruby", "-C", "/tmp", "good.rb"}, U, NULL, "changes the directory"},
    {{"ruby", "-S", "good.rb"}, U, NULL, "PATH"},
    /* node */
    {{"node", "train.js"}, F, "train.js", NULL},
    {{"node", "--max-old-space-size=4096", "--no-warnings", "evil.js"}, F, "evil.js", NULL},
    {{"node", "--max_old_space_size=4096", "evil.js"}, F, "evil.js", NULL},
    {{"node", "--title", "job", "evil.js"}, F, "evil.js", NULL},
    {{"node", "--", "evil.js"}, F, "evil.js", NULL},
    {{"node", "--max-old-space-size", "4096", "good.js"}, U, NULL, "without '=VALUE'"},
    {{"node", "-r", "evil", "good.js"}, U, NULL, "-r loads a module"},
    {{"node", "--require=evil", "good.js"}, U, NULL, "--require loads"},
    {{"node", "--import", "evil.mjs", "good.js"}, U, NULL, "--import loads"},
    {{"node", "--inspect=0.0.0.0:9229", "good.js"}, U, NULL, "debugger port"},
    {{"node", "-pe", "1"}, U, NULL, "-p runs code"},
    {{"node", "--jitless=1", "good.js"}, U, NULL, "takes no value"},
    {{"nodejs", "--experimental-anything", "good.js"}, U, NULL, "is not one"},
    /* the simple rule */
    {{"zsh", "job.zsh"}, F, "job.zsh", NULL},
    {{"zsh", "-f", "job.zsh"}, U, NULL, "options before the script"},
    {{"ksh", "--", "job.ksh"}, F, "job.ksh", NULL},
    {{"Rscript", "--vanilla", "train.R"}, F, "train.R", NULL},
    {{"Rscript", "-e", "1"}, U, NULL, "-e runs code"},
    {{"Rscript", "--file=evil.R", "good.R"}, U, NULL, "another file"},
    /* not interpreters: no script */
    {{"/usr/bin/true", "a"}, N, NULL, NULL},
    {{"shasum", "evil"}, N, NULL, NULL},
    {{"python3-config", "--cflags"}, N, NULL, NULL},
    {{"perldoc", "x"}, N, NULL, NULL},
};

static void test_table(void **state)
{
	(void)state;
	for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
		const struct tcase *c = &cases[t];
		char why[256];
		size_t at = 99;
		sl_wl_script_kind k =
		    sl_wl_script(c->argv[0], (char *const *)c->argv, NULL, &at, why, sizeof(why));
		if (k != c->want || (k == F && strcmp(c->argv[at], c->script) != 0) ||
		    (k == U && strstr(why, c->why) == NULL)) {
			fprintf(stderr,
			        "case %zu (%s %s %s): kind %d (want %d), at %zu, why '%s'\n", t,
			        c->argv[0], c->argv[1] ? c->argv[1] : "",
			        c->argv[1] && c->argv[2] ? c->argv[2] : "", (int)k, (int)c->want,
			        at, why);
			fail();
		}
	}
}

/* Variables that make the interpreter run other code make the script
 * unknown; harmless ones do not; python -E and -I ignore PYTHON*. */
static void test_environment(void **state)
{
	(void)state;
	const char *py[] = {"python3", "good.py", NULL};
	const char *pyE[] = {"python3", "-E", "good.py", NULL};
	const char *pl[] = {"perl", "good.pl", NULL};
	const char *sh[] = {"bash", "good.sh", NULL};
	const char *js[] = {"node", "good.js", NULL};
	char *inj_py[] = {"PATH=/usr/bin", "PYTHONPATH=/tmp/evil", NULL};
	char *ok_py[] = {"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", NULL};
	char *inj_pl[] = {"PERL5OPT=-MEvil", NULL};
	char *inj_sh[] = {"BASH_ENV=/tmp/evil.sh", NULL};
	char *inj_fn[] = {"BASH_FUNC_ls%%=() { evil; }", NULL};
	char *inj_js[] = {"NODE_OPTIONS=--require=/tmp/evil.js", NULL};
	char *ok_js[] = {"NODE_ENV=production", NULL};
	char why[256];
	size_t at;
	assert_int_equal(sl_wl_script("python3", (char *const *)py, inj_py, &at, why, sizeof(why)),
	                 U);
	assert_non_null(strstr(why, "PYTHONPATH"));
	assert_int_equal(sl_wl_script("python3", (char *const *)py, ok_py, &at, why, sizeof(why)),
	                 F);
	assert_int_equal(sl_wl_script("python3", (char *const *)pyE, inj_py, &at, why, sizeof(why)),
	                 F);
	assert_int_equal(sl_wl_script("perl", (char *const *)pl, inj_pl, &at, why, sizeof(why)), U);
	assert_int_equal(sl_wl_script("bash", (char *const *)sh, inj_sh, &at, why, sizeof(why)), U);
	assert_int_equal(sl_wl_script("bash", (char *const *)sh, inj_fn, &at, why, sizeof(why)), U);
	assert_int_equal(sl_wl_script("node", (char *const *)js, inj_js, &at, why, sizeof(why)), U);
	assert_int_equal(sl_wl_script("node", (char *const *)js, ok_js, &at, why, sizeof(why)), F);
	/* a #! script's interpreter */
	assert_int_equal(sl_wl_script_env("/bin/sh", inj_sh, why, sizeof(why)), U);
	assert_int_equal(sl_wl_script_env("/usr/bin/python3", ok_py, why, sizeof(why)), F);
	assert_int_equal(sl_wl_script_env("/usr/bin/env", inj_py, why, sizeof(why)), F);
}

/* A link under another name to an interpreter is read as that interpreter. */
static void test_link_name(void **state)
{
	(void)state;
	char dir[] = "/tmp/sl-wlscript-XXXXXX", link[64], why[256];
	size_t at;
	assert_non_null(mkdtemp(dir));
	snprintf(link, sizeof(link), "%s/train", dir);
	assert_int_equal(symlink("/usr/bin/python3", link), 0);
	const char *argv[] = {link, "-c", "print(1)", NULL};
	assert_int_equal(sl_wl_script(link, (char *const *)argv, NULL, &at, why, sizeof(why)), U);
	unlink(link);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table),
	    cmocka_unit_test(test_environment),
	    cmocka_unit_test(test_link_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

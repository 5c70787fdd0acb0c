/* Private to the launcher: the job's workload identity (run_workload.c),
 * shared by `run` and `measure`. */
#ifndef SECLAUNCH_LAUNCHER_WORKLOAD_INT_H
#define SECLAUNCH_LAUNCHER_WORKLOAD_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"

typedef struct sl_wl {
	json_t *event;  /* this job's event */
	json_t *events; /* the register's whole log since boot, this event last */
	uint8_t identity[32];
	uint8_t event_digest[32];
	int exe_fd;           /* the measured executable, run with execveat(AT_EMPTY_PATH) */
	char **exec_argv;     /* #! script: interpreter [arg] script ARG...; else NULL */
	char script_why[256]; /* why the script is "unknown" ("" when it is known) */
	int log_fd;           /* the workload log, locked for the job's life */
	char log_path[512];
	char reg[16];  /* "pcr15", "rtmr3"; "" when nothing was extended */
	char pcrs[96]; /* the quote's PCR selection including the register */
	size_t index;  /* this job's event in events */
	bool inited;
} sl_wl;

typedef struct sl_wl_in {
	char *const *argv;        /* the command as the user gave it */
	const char *exe;          /* argv[0] resolved (sl_job_resolve) */
	char *const *envp;        /* the job's environment, before SECLAUNCH_DATA */
	const char *image_digest; /* --image-digest, or NULL */
	const json_t *datasets;   /* [{"id", "root"}] */
	const json_t *outputs;    /* ["NAME=DESTINATION"] (NULL: none) */
	const char *policy_hex;
} sl_wl_in;

void sl_wl_init(sl_wl *w);
void sl_wl_free(sl_wl *w);
/* Opens and hashes the executable (and the script of an interpreter) and
 * builds the event; nothing is extended. */
SL_MUST_USE sl_err sl_wl_build(const sl_wl_in *in, sl_wl *w);
/* Which register: "tpm2" evidence -> PCR pcr, "tdx" -> RTMR3 (tsm_root:
 * NULL the kernel's), else none. Locks the log (log_path NULL: the
 * default for the register), checks it replays to the register's value,
 * extends the register, appends the event. */
SL_MUST_USE sl_err sl_wl_extend(sl_wl *w, const char *kind, const char *tcti, unsigned pcr,
                                const char *log_path);
/* Before a later quote (a renewal): re-reads the log under a shared lock
 * that holds off other jobs' extensions until sl_wl_unlock; checks this
 * job's event is still where it was. */
SL_MUST_USE sl_err sl_wl_refresh(sl_wl *w);
void sl_wl_unlock(sl_wl *w);
/* "workload_log" into evidence ev (a copy of the log; "current": this
 * job's event). */
SL_MUST_USE sl_err sl_wl_attach(const sl_wl *w, json_t *ev);
/* {"id", "root"} of the dataset at path into list: a sharded dataset
 * (folder) by its manifest root (sl_sldm_root), an SLD file by its
 * header's SHA-256. */
SL_MUST_USE sl_err sl_wl_dataset_entry(const char *path, json_t *list);
/* The PCR value a fresh register reaches with this one event. */
void sl_wl_predict_pcr(const sl_wl *w, uint8_t out[static 32]);

/* Which script an interpreter reads (workload_script.c): NONE, exe is no
 * interpreter seclaunch knows (by its name, or the name a link to it
 * resolves to); FILE, argv[*index] (for a #! script: envp does not change
 * which code runs); UNKNOWN, the script cannot be told for certain from
 * argv and envp, why says why (it names the option or variable). */
typedef enum { SL_WL_SCRIPT_NONE, SL_WL_SCRIPT_FILE, SL_WL_SCRIPT_UNKNOWN } sl_wl_script_kind;
sl_wl_script_kind sl_wl_script(const char *exe, char *const *argv, char *const *envp, size_t *index,
                               char *why, size_t whyn);
/* A #! script's interpreter: FILE, or UNKNOWN when envp makes it run other code. */
sl_wl_script_kind sl_wl_script_env(const char *interp, char *const *envp, char *why, size_t whyn);

/* Appends the workload form of each --output NAME=DEST, "NAME=" and the
 * destination the policy matches (sl_out_destination), to list. */
SL_MUST_USE sl_err sl_wl_output_entries(const char *const *spec, size_t n, json_t *list);

#endif

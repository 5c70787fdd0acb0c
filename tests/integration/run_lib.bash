# Helpers for run_*.sh and gpu_stage.sh (sourced after lib.sh; not a test).

# start_tpm NAME: lib.sh's start_swtpm (control channel at the server port + 1,
# ports drawn below the kernel's ephemeral range, retried when one is taken).
start_tpm() {
	start_swtpm "$@"
}

#!/usr/bin/env bash
# The output folder's privilege-boundary races (tests/integration/
# run_outputs_boundary.sh) with 30 s loops instead of 3 s: the status file
# swapped for a symlink, a folder flipped to a root folder during the wipe
# and during checkpoints, as user nobody.
SL_RACE_SECS=${SL_RACE_SECS:-30} exec bash "$(dirname "$0")/../integration/run_outputs_boundary.sh"

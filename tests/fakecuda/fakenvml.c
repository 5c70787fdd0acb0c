/* A stand-in for libnvidia-ml.so.1, for tests only (built as
 * build/tests/fakecuda/libnvidia-ml.so.1, never installed, found through
 * LD_LIBRARY_PATH): the confidential-computing settings seclaunch reads
 * come from the file $FAKENVML_CC, read again at every call, so a test can
 * change the GPU's mode while a job runs: "off" (or no file), "on",
 * "devtools" (on, in dev-tools mode). The GPU is never "ready". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct {
	unsigned version, environment, ccFeature, devToolsMode, multiGpuMode;
} nvml_cc_settings;

EXPORT int nvmlInit_v2(void)
{
	return 0;
}

EXPORT int nvmlShutdown(void)
{
	return 0;
}

EXPORT int nvmlSystemGetConfComputeSettings(nvml_cc_settings *s)
{
	char mode[32] = "off";
	const char *path = getenv("FAKENVML_CC");
	FILE *f = path != NULL ? fopen(path, "re") : NULL;
	if (f != NULL) {
		if (fgets(mode, sizeof(mode), f) == NULL)
			mode[0] = '\0';
		fclose(f);
		mode[strcspn(mode, "\n")] = '\0';
	}
	s->environment = 0;
	s->multiGpuMode = 0;
	s->ccFeature = strcmp(mode, "on") == 0 || strcmp(mode, "devtools") == 0;
	s->devToolsMode = strcmp(mode, "devtools") == 0;
	return 0;
}

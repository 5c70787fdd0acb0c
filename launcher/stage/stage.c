/* The generic side of staging: the checks every stage shares, and the
 * dispatch to its backend's table (stage_int.h). See include/seclaunch/stage.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stage_int.h"

sl_err sl_stage_where_parse(const char *s, sl_stage_where *out)
{
	if (strcmp(s, "auto") == 0)
		*out = SL_STAGE_AUTO;
	else if (strcmp(s, "host") == 0)
		*out = SL_STAGE_HOST;
	else if (strcmp(s, "gpu") == 0)
		*out = SL_STAGE_GPU;
	else if (strcmp(s, "gpu-ipc") == 0)
		*out = SL_STAGE_GPU_IPC;
	else if (strcmp(s, "stream") == 0)
		*out = SL_STAGE_STREAM;
	else
		return sl_err_set(
		    SL_E_USAGE, "--stage: '%s' is not one of auto, host, gpu, gpu-ipc, stream", s);
	return SL_OK;
}

sl_err sl_stage_new_(const struct sl_stage_ops *ops, const char *dataset_id, uint64_t size,
                     sl_stage **out)
{
	sl_stage *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (s == NULL)
		return sl_err_set(SL_E_NOMEM, "allocating a staging area");
	s->ops = ops;
	s->size = size;
	s->dataset_id = strdup(dataset_id);
	if (s->dataset_id == NULL) {
		free(s);
		return sl_err_set(SL_E_NOMEM, "allocating a staging area");
	}
	*out = s;
	return SL_OK;
}

sl_err sl_stage_write(sl_stage *s, uint64_t off, const void *p, size_t len)
{
	if ((s->sealed && !s->filling) || s->wiped)
		return sl_err_set(SL_E_INTERNAL, "dataset %s: write after staging ended",
		                  s->dataset_id);
	if (off != s->written || len > s->size - s->written)
		return sl_err_set(SL_E_INTERNAL,
		                  "dataset %s: write of %zu bytes at %llu, expected offset %llu of "
		                  "%llu",
		                  s->dataset_id, len, (unsigned long long)off,
		                  (unsigned long long)s->written, (unsigned long long)s->size);
	sl_err rc = s->ops->write(s, off, p, len);
	if (rc != SL_OK)
		return rc;
	s->written += len;
	return SL_OK;
}

sl_err sl_stage_seal(sl_stage *s)
{
	if (s->sealed)
		return SL_OK;
	if (s->wiped)
		return sl_err_set(SL_E_INTERNAL, "dataset %s: sealing a wiped stage",
		                  s->dataset_id);
	if (s->written != s->size)
		return sl_err_set(SL_E_TRUNCATED, "dataset %s: %llu of %llu bytes staged",
		                  s->dataset_id, (unsigned long long)s->written,
		                  (unsigned long long)s->size);
	sl_err rc = s->ops->seal(s);
	if (rc != SL_OK)
		return rc;
	s->sealed = true;
	return SL_OK;
}

sl_err sl_stage_wipe(sl_stage *s)
{
	if (s == NULL || s->wiped)
		return SL_OK;
	s->wiped = true;
	return s->ops->wipe(s);
}

void sl_stage_free(sl_stage *s)
{
	if (s == NULL)
		return;
	sl_err ignored = sl_stage_wipe(s); /* the caller reported wipe results already */
	(void)ignored;
	json_decref(s->handoff);
	free(s->dataset_id);
	free(s);
}

const char *sl_stage_method(const sl_stage *s)
{
	return s->method;
}

const char *sl_stage_dataset_id(const sl_stage *s)
{
	return s->dataset_id;
}

uint64_t sl_stage_size(const sl_stage *s)
{
	return s->size;
}

int sl_stage_fd(const sl_stage *s)
{
	return s->ops->fd != NULL && !s->wiped ? s->ops->fd(s) : -1;
}

const uint8_t *sl_stage_host_view(const sl_stage *s)
{
	return s->ops->view != NULL && !s->wiped ? s->ops->view(s) : NULL;
}

bool sl_stage_wiped(const sl_stage *s)
{
	return s->wiped;
}

sl_err sl_stage_describe(const sl_stage *s, int job_fd, json_t **out)
{
	sl_err rc = SL_E_NOMEM;
	json_t *o = json_object();

	SL_ENSURE(o != NULL, SL_E_NOMEM, "building SECLAUNCH_DATA");
	SL_ENSURE(!s->wiped && s->sealed, SL_E_INTERNAL, "dataset %s: not staged", s->dataset_id);
	SL_ENSURE(json_object_set_new(o, "size", json_integer((json_int_t)s->size)) == 0,
	          SL_E_NOMEM, "building SECLAUNCH_DATA");
	SL_ENSURE(json_object_set_new(o, "method", json_string(s->method)) == 0, SL_E_NOMEM,
	          "building SECLAUNCH_DATA");
	SL_GUARD(s->ops->describe(s, job_fd, o));
	if (s->handoff != NULL)
		SL_ENSURE(json_object_update(o, s->handoff) == 0, SL_E_NOMEM,
		          "building SECLAUNCH_DATA");
	*out = o;
	o = NULL;
	rc = SL_OK;
out:
	json_decref(o);
	return rc;
}

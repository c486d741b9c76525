/* What a backend and its instances share: the programs built on their context, each built once
 * whichever of them asks first (cl_build), and the lock that guards them and the lost flag. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_backend.h"
#include "error.h"
#include "program.h"

typedef struct cl_built {
    struct cl_built *next;
    cl_program program;
    char key[]; /* the source's name, a newline, the options */
} cl_built;

/* The compile hook of cl_build: on_compile, told under the shared lock. */
static void compiling(const char *source_name, void *user) {
    cl_backend_ctx *b = user;
    clinfer_compile_event e = {b->info.name, source_name, ++b->shared->compiled};
    b->options.on_compile(&e, b->options.on_compile_user);
}

clinfer_status cl_build(cl_backend_ctx *b, const char *source_name, const char *extra_options,
                        cl_program *out) {
    cl_shared *sh = b->shared;
    clinfer_status st = CLINFER_OK;
    const char *options = extra_options ? extra_options : "";
    size_t key_len = strlen(source_name) + 1 + strlen(options);
    cl_built *fresh = malloc(sizeof *fresh + key_len + 1), *e;
    if (!fresh) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: no memory for a program");
    snprintf(fresh->key, key_len + 1, "%s\n%s", source_name, options);
    pthread_mutex_lock(&sh->lock);
    for (e = sh->programs; e && strcmp(e->key, fresh->key) != 0;)
        e = e->next;
    if (!e) {
        cl_compile_hook hook = {b->options.on_compile ? compiling : NULL, b};
        st = cl_program_build_hooked(b->context, b->device, &b->info, b->cache_dir, source_name,
                                     extra_options, &hook, &fresh->program);
        if (st == CLINFER_OK) {
            fresh->next = sh->programs;
            sh->programs = e = fresh;
            fresh = NULL;
        }
    }
    if (e) {
        clRetainProgram(e->program);
        *out = e->program;
    }
    pthread_mutex_unlock(&sh->lock);
    free(fresh);
    return st;
}

clinfer_status cl_shared_create(cl_shared **out) {
    cl_shared *sh = calloc(1, sizeof *sh);
    if (!sh || pthread_mutex_init(&sh->lock, NULL)) {
        free(sh);
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: shared state");
    }
    *out = sh;
    return CLINFER_OK;
}

void cl_shared_free(cl_shared *sh) {
    if (!sh) return;
    for (cl_built *e = sh->programs, *next; e; e = next) {
        next = e->next;
        clReleaseProgram(e->program);
        free(e);
    }
    pthread_mutex_destroy(&sh->lock);
    free(sh);
}

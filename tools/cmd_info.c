/* clinfer info: what a model file holds and what it needs on the chosen device. */
#include <stdio.h>

#include "cli.h"
#include "chat.h"
#include "cli_common.h"
#include "model.h"

static void usage(FILE *out) {
    fprintf(out, "usage: clinfer info [-m MODEL] [OPTIONS]\n\n"
                 "Prints the architecture, hyperparameters, tensors by type and the memory plan\n"
                 "(weights, KV cache, scratch) for the chosen device.\n\n"
                 "      --ctx N          context length of the memory plan; 0 is the "
                 "model's\n" CLI_MODEL_HELP);
}

static double mib(uint64_t bytes) {
    return (double)bytes / (1024.0 * 1024.0);
}

/* The chat format recognised in tokenizer.chat_template, or why there is none. */
static void print_chat_template(const gguf_file *f) {
    gguf_str tmpl = {NULL, 0};
    chat_format format;
    if (!gguf_find_kv(f, "tokenizer.chat_template"))
        printf("chat:         no template (--chat needs --chat-template NAME)\n");
    else if (gguf_get_str(f, "tokenizer.chat_template", &tmpl) == CLINFER_OK &&
             chat_detect(tmpl.ptr, (size_t)tmpl.len, NULL, &format) == CLINFER_OK)
        printf("chat:         %s template\n", chat_format_name(format));
    else
        printf("chat:         unrecognised template (--chat needs --chat-template NAME)\n");
}

/* Tensor count and bytes per element type, in type-id order. */
static void print_tensor_types(const gguf_file *f) {
    enum { MAX_TYPE = 64 };
    size_t count[MAX_TYPE] = {0};
    uint64_t bytes[MAX_TYPE] = {0};
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if ((unsigned)t->type < MAX_TYPE) {
            count[t->type]++;
            bytes[t->type] += t->size;
        }
    }
    printf("tensors:      %zu\n", gguf_tensor_count(f));
    for (int t = 0; t < MAX_TYPE; t++)
        if (count[t])
            printf("  %-10s  %4zu tensors  %9.2f MiB\n", clinfer_dtype_name((clinfer_dtype)t),
                   count[t], mib(bytes[t]));
}

int cmd_info(int argc, char **argv) {
    static const struct option options[] = {
        CLI_MODEL_OPTIONS, {"ctx", required_argument, NULL, OPT_CTX}, {NULL, 0, NULL, 0}};
    cli_model_opts mo;
    cli_model_opts_init(&mo);
    long n_ctx = 0;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" CLI_MODEL_SHORT, options, NULL)) != -1) {
        if (cli_model_option(opt, optarg, &mo)) continue;
        if (opt == 'h') {
            usage(stdout);
            return 0;
        }
        if (opt == OPT_CTX) {
            if (!cli_parse_long("--ctx", optarg, 0, INT32_MAX, &n_ctx)) return 1;
            continue;
        }
        return cli_bad_option("info", opt, argv);
    }
    if (optind < argc)
        return cli_error("info: unexpected argument '%s' (the model goes after -m)", argv[optind]);

    clinfer_model *model = NULL;
    double load_ms = 0;
    if (cli_load_model(&mo, &model, &load_ms)) return 1;
    clinfer_model_info info;
    clinfer_memory_plan plan;
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = (uint32_t)n_ctx;
    clinfer_status st = clinfer_model_get_info(model, &info);
    if (st == CLINFER_OK) st = clinfer_model_memory_plan(model, &cp, &plan);
    if (st != CLINFER_OK) {
        cli_error("info: %s (%s)", clinfer_last_error(), clinfer_status_str(st));
        clinfer_model_free(model);
        return 1;
    }
    const clinfer_hparams *hp = &model->hp;
    printf("name:         %s\n", info.name[0] ? info.name : "(none)");
    printf("architecture: %s (executor: %s)\n", info.architecture, clinfer_arch_name(hp->arch));
    printf("gguf:         version %u, %.2f MiB\n", gguf_version(model->gguf),
           mib(gguf_file_size(model->gguf)));
    printf("parameters:   %.1f M\n", (double)info.n_params / 1e6);
    printf("vocab:        %u\n", info.n_vocab);
    printf("context:      %u (training)\n", info.n_ctx_train);
    printf("embedding:    %u, feed-forward %u, layers %u\n", info.n_embd, info.n_ff, info.n_layer);
    printf("heads:        %u query, %u key/value, head dim %u\n", info.n_head, info.n_head_kv,
           hp->head_dim);
    printf("rope:         %u dims, base %g, %s\n", hp->n_rot, (double)hp->rope_freq_base,
           hp->rope_neox ? "neox" : "normal");
    printf("norm eps:     %g\n", (double)hp->norm_eps);
    print_chat_template(model->gguf);
    print_tensor_types(model->gguf);
    printf("backend:      %s\n", info.backend);
    printf("memory plan:  n_ctx %u, n_batch %u\n", plan.n_ctx, plan.n_batch);
    printf("  weights     %9.2f MiB (shared by all contexts)\n", mib(plan.weight_bytes));
    printf("  KV cache    %9.2f MiB per context\n", mib(plan.kv_bytes));
    printf("  scratch     %9.2f MiB per context\n", mib(plan.scratch_bytes));
    printf("  total       %9.2f MiB with one context\n",
           mib(plan.weight_bytes + plan.kv_bytes + plan.scratch_bytes));
    printf("load time:    %.0f ms\n", load_ms);
    clinfer_model_free(model);
    return 0;
}

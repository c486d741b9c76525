/* clinfer info: what a model file holds and what it needs on the chosen device. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"

static void usage(FILE *out) {
    fprintf(out, "usage: clinfer info [-m MODEL] [OPTIONS]\n\n"
                 "Prints the architecture, hyperparameters, tensors by type and the memory plan\n"
                 "(weights, KV cache, scratch) for the chosen device.\n\n"
                 "      --ctx-size N     context length of the memory plan; 0 is the "
                 "model's\n" CLI_MODEL_HELP);
}

static double mib(uint64_t bytes) {
    return (double)bytes / (1024.0 * 1024.0);
}

int cmd_info(int argc, char **argv) {
    static const struct option options[] = {CLI_MODEL_OPTIONS,
                                            {"ctx-size", required_argument, NULL, OPT_CTX},
                                            {"ctx", required_argument, NULL, OPT_CTX},
                                            {NULL, 0, NULL, 0}};
    cli_model_opts mo;
    cli_model_opts_init(&mo);
    long n_ctx = 0;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" CLI_MODEL_SHORT, options, NULL)) != -1) {
        int used = cli_model_option(opt, optarg, &mo);
        if (used < 0) return 1; /* a bad value, said */
        if (used) continue;
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
    printf("name:         %s\n", info.name[0] ? info.name : "(none)");
    printf("architecture: %s\n", info.architecture);
    printf("gguf:         version %u, %.2f MiB\n", info.gguf_version, mib(info.file_bytes));
    printf("parameters:   %.1f M\n", (double)info.n_params / 1e6);
    if (info.n_expert)
        printf("experts:      %u, %u per token: %.1f M parameters active, %.2f MiB of weights "
               "read per token\n",
               info.n_expert, info.n_expert_used, (double)info.n_params_active / 1e6,
               mib(info.weight_bytes_active));
    printf("vocab:        %u\n", info.n_vocab);
    printf("context:      %u (training)\n", info.n_ctx_train);
    printf("embedding:    %u, feed-forward %u, layers %u\n", info.n_embd, info.n_ff, info.n_layer);
    printf("heads:        %u query, %u key/value, head dim %u\n", info.n_head, info.n_head_kv,
           info.head_dim);
    printf("rope:         %u dims, base %g, %s, scaling %s\n", info.n_rot,
           (double)info.rope_freq_base, info.rope_neox ? "neox" : "normal", info.rope_scaling);
    printf("norm eps:     %g\n", (double)info.norm_eps);
    if (!info.chat_format[0])
        printf("chat:         no template (--chat needs --chat-template NAME)\n");
    else if (!strcmp(info.chat_format, "unrecognised"))
        printf("chat:         unrecognised template (--chat needs --chat-template NAME)\n");
    else
        printf("chat:         %s template\n", info.chat_format);
    printf("tensors:      %u\n", info.n_tensors);
    for (uint32_t t = 0; t < info.n_tensor_types; t++)
        printf("  %-10s  %4u tensors  %9.2f MiB\n", info.tensor_types[t].type,
               info.tensor_types[t].count, mib(info.tensor_types[t].bytes));
    printf("backend:      %s\n", info.backend);
    printf("placement:\n");
    cli_print_placement(model, "  ", stdout);
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

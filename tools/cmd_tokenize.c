/* clinfer tokenize: the token ids (and pieces) of a text. It loads the model vocab_only (the
 * tokenizer metadata, no weights or device), so it also works on vocab-only GGUF files. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "cli.h"
#include "cli_common.h"

enum { OPT_PIECES = 512, OPT_NO_BOS, OPT_NO_SPECIAL };

static void usage(FILE *out) {
    fprintf(out, "usage: clinfer tokenize -m FILE.gguf [--pieces] [--no-bos] TEXT\n\n"
                 "Prints the token ids of TEXT ('-' reads standard input) on one line.\n\n"
                 "  -m, --model FILE     GGUF file with tokenizer metadata (vocab-only is fine;\n"
                 "                       default: the default model, as for run)\n"
                 "      --pieces         one token per line: id and its text, escaped\n"
                 "      --no-bos         do not add BOS even where the model's prompts start "
                 "with it\n"
                 "      --no-special     take special-token text such as <|im_start|> literally\n"
                 "  -h, --help           this help\n");
}

static char *read_stdin(size_t *len) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, stdin)) > 0;) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(buf, 2 * cap);
            if (!bigger) {
                free(buf);
                return NULL;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    *len = n;
    return buf;
}

/* The piece as a quoted C-like string: control bytes, quotes and bytes that are not whole
 * UTF-8 characters (a piece may hold part of one) escaped, characters kept. */
static void print_piece(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        utf8proc_int32_t cp;
        utf8proc_ssize_t cl = c < 0x80 ? 1
                                       : utf8proc_iterate((const utf8proc_uint8_t *)s + i,
                                                          (utf8proc_ssize_t)(n - i), &cp);
        if (cl > 1) {
            fwrite(s + i, 1, (size_t)cl, stdout);
            i += (size_t)cl - 1;
        } else if (c >= 0x80)
            printf("\\x%02x", c);
        else if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static int print_tokens(const clinfer_model *v, const int32_t *ids, size_t n, bool pieces) {
    for (size_t i = 0; i < n; i++) {
        if (!pieces) {
            printf(i ? " %d" : "%d", ids[i]);
            continue;
        }
        char piece[1024];
        size_t len;
        clinfer_status st = clinfer_token_to_piece(v, ids[i], piece, sizeof piece, &len);
        if (st != CLINFER_OK) return cli_error("tokenize: %s", clinfer_last_error());
        printf("%6d  ", ids[i]);
        print_piece(piece, len);
        putchar('\n');
    }
    if (!pieces) putchar('\n');
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    static const struct option options[] = {{"model", required_argument, NULL, 'm'},
                                            {"pieces", no_argument, NULL, OPT_PIECES},
                                            {"no-bos", no_argument, NULL, OPT_NO_BOS},
                                            {"no-special", no_argument, NULL, OPT_NO_SPECIAL},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    cli_model_opts model;
    cli_model_opts_init(&model);
    model.params.vocab_only = true;
    bool pieces = false, bos = true, special = true;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":m:h", options, NULL)) != -1) {
        switch (opt) {
        case 'm':
            model.path = optarg;
            break;
        case OPT_PIECES:
            pieces = true;
            break;
        case OPT_NO_BOS:
            bos = false;
            break;
        case OPT_NO_SPECIAL:
            special = false;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            return cli_bad_option("tokenize", opt, argv);
        }
    }
    if (optind + 1 != argc)
        return cli_error("tokenize: expected one TEXT argument ('-' for stdin), got %d",
                         argc - optind);

    int rc = 1;
    clinfer_model *v = NULL;
    int32_t *ids = NULL;
    char *input = NULL;
    const char *text = argv[optind];
    size_t len = strlen(text), n = 0;
    clinfer_status st;
    if (cli_load_model(&model, &v, NULL)) goto cleanup;
    if (!strcmp(text, "-")) {
        text = input = read_stdin(&len);
        if (!input) {
            cli_error("tokenize: reading standard input: out of memory");
            goto cleanup;
        }
    }
    bos = bos && clinfer_token_add_bos(v);
    st = clinfer_tokenize(v, text, len, bos, special, NULL, 0, &n);
    if (st == CLINFER_ERR_BUFFER_TOO_SMALL) {
        ids = malloc((n ? n : 1) * sizeof *ids);
        st = ids ? clinfer_tokenize(v, text, len, bos, special, ids, n, &n)
                 : CLINFER_ERR_OUT_OF_MEMORY;
    }
    if (st != CLINFER_OK) {
        cli_error("tokenize: %s (%s)", clinfer_last_error(), clinfer_status_str(st));
        goto cleanup;
    }
    rc = print_tokens(v, ids, n, pieces);
cleanup:
    free(input);
    free(ids);
    clinfer_model_free(v);
    return rc;
}

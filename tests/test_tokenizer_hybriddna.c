/* The "hybriddna" tokenizer model (byte-level BPE whose <dna> blocks become 6-mer tokens) on a
 * vocabulary generated here, with <dna> and </dna> as normal, control and user-defined tokens,
 * and without <oov> (plain BPE). The expected ids are those llama.cpp's llama-tokenize gave for
 * the same vocabularies (`llama-tokenize -m F --ids --no-bos -p TEXT`, which parses special
 * tokens, and the same with --no-parse-special; checked when this test was written, as were the
 * k-mers' pieces). Run as `test_tokenizer_hybriddna DIR`, it writes them to DIR/hybriddna-*.gguf.
 */
#include <stdio.h>

#include "gpt2_bytes.h"
#include "vocab_fixture.h"

#define MARK "\xee\x80\x80" /* U+E000, the k-mers' marker */

/* Before the 256 byte characters: specials, k-mers (and a marked token before <oov>, whose
 * marker stays); after them BPE tokens, "CCCCCC" among them. */
static const char *const head[] = {"<|endoftext|>", "X" MARK,      "<dna>",       "</dna>",
                                   "<oov>",         "ACGTAC" MARK, "GGGGGG" MARK, "TTAAAA" MARK,
                                   "CCCCCC" MARK,   MARK};
static const char *const tail[] = {"hi", "CC", "CCCC", "CCCCCC"};
static const char *const merges[] = {"h i", "C C", "CC CC", "CCCC CC"};
enum {
    EOT,
    X_MARKED,
    DNA,
    END_DNA,
    OOV,
    ACGTAC,
    G6,
    TTAAAA,
    C6_KMER,
    MARKER,
    BYTE0,
    HI = BYTE0 + 256,
    CC,
    CCCC,
    C6,
    N_TOKENS
};
#define BYTE(c) (BYTE0 + (unsigned char)(c))

/* tag_type: the token type of <dna> and </dna>; with_oov false renames <oov>. */
static clinfer_vocab *load(int32_t tag_type, bool with_oov, const char *dir) {
    static char chars[256][3];
    const char *texts[N_TOKENS];
    int32_t types[N_TOKENS];
    for (int i = 0; i < BYTE0; i++) {
        texts[i] = head[i];
        types[i] = i == EOT || i == OOV ? 3 : i == DNA || i == END_DNA ? tag_type : 1;
    }
    if (!with_oov) texts[OOV] = "<nov>";
    for (int b = 0; b < 256; b++) {
        byte_char(b, chars[b]);
        texts[BYTE0 + b] = chars[b];
        types[BYTE0 + b] = 1;
    }
    for (int i = 0; i < N_TOKENS - HI; i++) {
        texts[HI + i] = tail[i];
        types[HI + i] = 1;
    }
    gguf_writer *w = gw_new();
    gw_kv_str(w, "general.architecture", "gpt2"); /* for llama.cpp's loader */
    gw_kv_str(w, "tokenizer.ggml.model", "hybriddna");
    gw_kv_str(w, "tokenizer.ggml.pre", "gpt-2");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", texts, N_TOKENS);
    gw_kv_arr_i32(w, "tokenizer.ggml.token_type", types, N_TOKENS);
    gw_kv_arr_str(w, "tokenizer.ggml.merges", merges, sizeof merges / sizeof merges[0]);
    gw_kv_u32(w, "tokenizer.ggml.bos_token_id", EOT);
    gw_kv_u32(w, "tokenizer.ggml.eos_token_id", EOT);
    if (dir) {
        char path[512];
        snprintf(path, sizeof path, "%s/hybriddna-type%d%s.gguf", dir, (int)tag_type,
                 with_oov ? "" : "-no-oov");
        EXPECT(gw_write_file(w, path) == 0, "writing %s", path);
    }
    return vocab_from_writer(w, CLINFER_OK);
}

static void expect_piece(const clinfer_vocab *v, int32_t id, const char *want) {
    char piece[16];
    size_t len;
    EXPECT_OK(vocab_piece(v, id, piece, sizeof piece, &len));
    EXPECT(len == strlen(want) && memcmp(piece, want, len) == 0, "piece of %d", id);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : NULL;
    const int32_t tag_types[] = {1, 3, 4}; /* normal, control, user-defined */
    const char *block = "hi <dna>acgtacGGGGGGtt</dna> CCCCCC";
    const int32_t *dna = IDS(HI, BYTE(' '), DNA, ACGTAC, G6, TTAAAA, END_DNA, BYTE(' '), C6);
    /* the same when the tags are taken out before the DNA scan */
    const int32_t *tags_split =
        IDS(HI, BYTE(' '), DNA, BYTE('a'), BYTE('c'), BYTE('g'), BYTE('t'), BYTE('a'), BYTE('c'),
            BYTE('G'), BYTE('G'), BYTE('G'), BYTE('G'), BYTE('G'), BYTE('G'), BYTE('t'), BYTE('t'),
            END_DNA, BYTE(' '), C6);
    for (int t = 0; t < 3; t++) {
        clinfer_vocab *v = load(tag_types[t], true, dir);
        if (!v) continue;
        for (int special = 0; special < 2; special++) {
            /* a tag taken out as a special token leaves its DNA to plain BPE */
            bool split = tag_types[t] == 4 || (tag_types[t] == 3 && special);
            expect_ids(v, block, false, special, split ? tags_split : dna);
            expect_ids(v, "x<dna>CCCCCCNNNNNNac", false, special, /* unclosed */
                       split ? IDS(BYTE('x'), DNA, C6, BYTE('N'), BYTE('N'), BYTE('N'), BYTE('N'),
                                   BYTE('N'), BYTE('N'), BYTE('a'), BYTE('c'))
                             : IDS(BYTE('x'), DNA, C6_KMER, OOV, OOV));
            expect_ids(v, "<dna></dna><dna>ttaa</dna>hi", false, special,
                       split ? IDS(DNA, END_DNA, DNA, BYTE('t'), BYTE('t'), BYTE('a'), BYTE('a'),
                                   END_DNA, HI)
                             : IDS(DNA, END_DNA, DNA, TTAAAA, END_DNA, HI));
        }
        expect_ids(v, "a</dna>", false, false,
                   tag_types[t] == 4 ? IDS(BYTE('a'), END_DNA)
                                     : IDS(BYTE('a'), BYTE('<'), BYTE('/'), BYTE('d'), BYTE('n'),
                                           BYTE('a'), BYTE('>')));
        expect_ids(v, "<|endoftext|>hi", true, true, IDS(EOT, EOT, HI));
        /* k-mers read as bare DNA but are found by their marked text */
        expect_piece(v, ACGTAC, "ACGTAC");
        expect_piece(v, C6_KMER, "CCCCCC");
        expect_piece(v, MARKER, MARK);       /* the marker alone stays */
        expect_piece(v, X_MARKED, "X" MARK); /* before <oov>: stays */
        EXPECT(vocab_find(v, "ACGTAC" MARK, 9) == ACGTAC, "k-mer by marked text");
        EXPECT(vocab_find(v, "CCCCCC", 6) == C6, "BPE token by text");
        vocab_free(v);
    }
    clinfer_vocab *v = load(1, false, dir); /* no <oov>: plain BPE, markers kept */
    if (v) {
        expect_ids(v, "hi <dna>CCCCCC</dna>", false, true,
                   IDS(HI, BYTE(' '), BYTE('<'), BYTE('d'), BYTE('n'), BYTE('a'), BYTE('>'), C6,
                       BYTE('<'), BYTE('/'), BYTE('d'), BYTE('n'), BYTE('a'), BYTE('>')));
        expect_piece(v, ACGTAC, "ACGTAC" MARK);
        vocab_free(v);
    }
    return finish("test_tokenizer_hybriddna");
}

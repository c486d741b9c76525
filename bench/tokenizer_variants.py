"""Writes the inputs of bench/crosscheck_tokenizers.sh into OUT: for each pre-tokenizer name in
src/tok_pretok_table.c a copy of the GPT-2 vocab file whose tokenizer.ggml.pre is that name
(pre-NAME.gguf), and corpus.txt: the published test inputs of three vocab files and texts in
more scripts, marks, digit runs and whitespace.

usage: tokenizer_variants.py VOCAB_DIR TABLE.c OUT"""
import os
import re
import sys

import gguf

EXTRA = [
    "HelloWorld iPhone McDonald's \u00c4pfel\u00d6l \u00c9COLE \u00e9cole stra\u00dfe \u0391\u0392\u0393\u03b1\u03b2\u03b3",
    "I'M YOU'RE we'LL it'S don't 's 'S 'll 'LL ''",
    "1234567 12 123 1234 12345678901 \u0661\u0662\u0663\u0664\u0665 \u00b2\u00b3 \u2163\u216b 3.14159 1,000,000",
    "\u4e2d\u6587\u6d4b\u8bd5 \u6f22\u5b57\u304b\u306a\u30ab\u30ca \ud55c\uad6d\uc5b4 \u3131\u3134 \u3105\u3106 \u3002\uff0c\u3001\uff01\u2026\u201c\u201d",
    "\u0e44\u0e17\u0e22 \u0e9e\u0eb2\u0eaa\u0eb2\u0ea5\u0eb2\u0ea7 \u1797\u17b6\u179f\u17b6 \u1019\u103c\u1014\u103a\u1019\u102c \uff76\uff80\uff76\uff85 \u2f00\u2f01",
    "na\u00efve caf\u00e9 e\u0301 a\u0308 \u091e\u093f \u0915\u094d\u0937\u093f \u0939\u093f\u0928\u094d\u0926\u0940 \u09ac\u09be\u0982\u09b2\u09be",
    "\t\ttab  two   three\n\n\n  \r\n\r\n end",
    "<sentinel:12> IMGIMGABCZ IMGIMGAZ x a\u00a0b\u3000c\u2003d",
    "foo(bar)=1; x+=2 // comment\n    return 0;\n a/b\n/c// d/\n",
    "\U0001f44b\U0001f3fd \U0001f999 \u2211\u222b\u221a \u00a9\u00ae\u2122",
    "word word word " + " " * 600 + "x 12345 abc 678 9012345",
]


def main():
    vocab_dir, table, out = sys.argv[1:4]
    names = re.findall(r'^\s*\{"([^"]+)", re_', open(table).read(), re.M)
    base = gguf.GGUFReader(os.path.join(vocab_dir, "ggml-vocab-gpt-2.gguf"))
    for name in names:
        w = gguf.GGUFWriter(os.path.join(out, f"pre-{name}.gguf"), arch="gpt2")
        for key, field in base.fields.items():
            if key.startswith("GGUF.") or key == "general.architecture":
                continue
            value = name if key == "tokenizer.ggml.pre" else field.contents()
            if field.types[0] == gguf.GGUFValueType.ARRAY:
                w.add_array(key, value)
            else:
                w.add_key_value(key, value, field.types[0])
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.close()
    texts = []
    for f in ("gpt-2", "qwen35", "gemma-4"):
        with open(os.path.join(vocab_dir, f"ggml-vocab-{f}.gguf.inp"), encoding="utf-8") as inp:
            texts += [t for t in inp.read().split("\n__ggml_vocab_test__\n") if t]
    with open(os.path.join(out, "corpus.txt"), "w", encoding="utf-8") as corpus:
        corpus.write("\n".join(texts + EXTRA))


main()

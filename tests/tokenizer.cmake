# Tokenizers: llama.cpp's vocab vectors (tools/fetch_vocab.sh), one test per vocabulary file
# (test_tokenizer_vocab's table says what to expect of each); skipped when the files are not there.
# The executable runs as the gpt-2 test; the others reuse it.
clinfer_test(test_tokenizer_vocab SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_vocab.c
  ARGS gpt-2)
foreach(vocab llama-spm bert-bge command-r deepseek-coder deepseek-llm falcon gemma-4 llama-bpe
    mpt phi-3 qwen2 qwen35 refact starcoder aquila baichuan gpt-neox nomic-bert-moe)
  add_test(NAME test_tokenizer_${vocab} COMMAND test_tokenizer_vocab ${vocab})
  set_tests_properties(test_tokenizer_${vocab} PROPERTIES LABELS quick SKIP_RETURN_CODE 77
    ENVIRONMENT "${CLINFER_TEST_ENV}")
endforeach()
clinfer_test(test_tokenizer_pretok SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_pretok.c)
clinfer_test(test_tokenizer_ugm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_ugm.c)
clinfer_test(test_tokenizer_rwkv SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_rwkv.c)
clinfer_test(test_tokenizer_plamo2 SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_plamo2.c)
clinfer_test(test_tokenizer_whitespace
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_whitespace.c)
clinfer_test(test_tokenizer_hybriddna
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_hybriddna.c)

# `clinfer tokenize` on a vocab-only file: GPT-2's ids for "Hello world" (as in the vectors),
# and a one-line error for a file that is not GGUF. with_vocab.sh finds the file when the test
# runs (the directory may be set after configuring) and skips without it.
add_test(NAME cli_tokenize COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/with_vocab.sh
  ggml-vocab-gpt-2.gguf $<TARGET_FILE:clinfer_cli> tokenize -m {} "Hello world")
set_tests_properties(cli_tokenize PROPERTIES LABELS quick PASS_REGULAR_EXPRESSION "^15496 995\n$"
  SKIP_RETURN_CODE 77 ENVIRONMENT "${CLINFER_TEST_ENV}")
add_test(NAME cli_tokenize_not_gguf
  COMMAND clinfer_cli tokenize -m ${CMAKE_CURRENT_LIST_FILE} "Hello")
set_tests_properties(cli_tokenize_not_gguf PROPERTIES LABELS quick WILL_FAIL TRUE)
clinfer_test(test_tokenizer_load SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_load.c)
# Against llama.cpp's llama-tokenize (label peer): every vocab file and every pre-tokenizer name
# on a wider corpus (bench/crosscheck_tokenizers.sh); skipped (77) without the peer.
add_test(NAME crosscheck_tokenizers
  COMMAND bash ${PROJECT_SOURCE_DIR}/bench/crosscheck_tokenizers.sh --bin $<TARGET_FILE:clinfer_cli>)
set_tests_properties(crosscheck_tokenizers PROPERTIES LABELS peer SKIP_RETURN_CODE 77 TIMEOUT 1200
  ENVIRONMENT "${CLINFER_TEST_ENV}")

# Against llama.cpp (label peer), where bench/compare_llamacpp.sh has built the peer in its cache.
# clinfer quantize and llama-quantize on one F16 file (and, for the K file types, on a 256-wide
# random-weight F32 one): each output is scored by both tools within 1% of each other, and
# clinfer's within 1% of llama.cpp's or better (bench/quantize_compare.sh); skipped (77) without
# the peer.
add_test(NAME quantize_compare
  COMMAND bash ${PROJECT_SOURCE_DIR}/bench/quantize_compare.sh --bin $<TARGET_FILE:clinfer_cli>)
set_tests_properties(quantize_compare PROPERTIES LABELS peer SKIP_RETURN_CODE 77 TIMEOUT 2400
  ENVIRONMENT "${CLINFER_TEST_ENV}")
# Every architecture's forward pass against llama.cpp's on a small random-weight model per
# architecture: perplexity within 1e-3, the same greedy tokens but at near ties
# (bench/crosscheck_archs.sh).
add_test(NAME crosscheck_archs
  COMMAND bash ${PROJECT_SOURCE_DIR}/bench/crosscheck_archs.sh --bin $<TARGET_FILE:clinfer_cli>
    --force $<TARGET_FILE:teacher_force>)
set_tests_properties(crosscheck_archs PROPERTIES LABELS peer SKIP_RETURN_CODE 77 TIMEOUT 900
  ENVIRONMENT "${CLINFER_TEST_ENV}")
# Gemma 3 270M ($CLINFER_GEMMA3_MODEL) greedy against a live llama-simple on the same weights
# (bench/gemma3_greedy.sh); skipped (77) without the model or the peer.
add_test(NAME gemma3_greedy
  COMMAND bash ${PROJECT_SOURCE_DIR}/bench/gemma3_greedy.sh --bin $<TARGET_FILE:clinfer_cli>)
set_tests_properties(gemma3_greedy PROPERTIES LABELS peer SKIP_RETURN_CODE 77 TIMEOUT 1200
  ENVIRONMENT "${CLINFER_TEST_ENV}")
# clinfer serve's /v1/embeddings against llama-server --embeddings --pooling mean on the default
# model ($CLINFER_MODEL): cosine similarity of each text's vectors at least 0.999
# (bench/embeddings_compare.sh); skipped (77) without the model or the peer.
add_test(NAME embeddings_compare
  COMMAND bash ${PROJECT_SOURCE_DIR}/bench/embeddings_compare.sh --bin $<TARGET_FILE:clinfer_cli>)
set_tests_properties(embeddings_compare PROPERTIES LABELS peer SKIP_RETURN_CODE 77 TIMEOUT 600
  ENVIRONMENT "${CLINFER_TEST_ENV}")

# The model executor: tiny generated models of every architecture and weight type.
clinfer_test(test_model_tiny SOURCES test_model_tiny.c tiny_model.c)
# The real default model (tools/fetch_model.sh puts it in ~/.cache/clinfer/models; $CLINFER_MODEL
# names it); skipped when absent.
clinfer_test(test_smollm2 SOURCES test_smollm2.c LABELS model
  ENV "CLINFER_TEST_MODELS=${PROJECT_SOURCE_DIR}/models")
# Gemma 3 270M (Q4_K_M) at $CLINFER_GEMMA3_MODEL: greedy texts as llama.cpp's, recorded in
# tests/gemma3_greedy.txt (bench/gemma3_greedy.sh); skipped when unset.
clinfer_test(test_gemma3 SOURCES test_gemma3.c LABELS model
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/gemma3_greedy.txt)
# Loading and freeing a model 100 times in one process on OpenCL, CLBlast forced on: RSS flat.
clinfer_test(test_model_lifetime SOURCES test_model_lifetime.c tiny_model.c)
if(CLINFER_WITH_CLBLAST)
  target_compile_definitions(test_model_lifetime PRIVATE CLINFER_WITH_CLBLAST=1)
endif()
# Contexts of one model decoding at once from several threads, on every backend.
clinfer_test(test_contexts SOURCES test_contexts.c tiny_model.c)
# Batches of several sequences (clinfer_batch_eval) against each sequence alone, the sequence
# operations, bad batches; reference and OpenCL, the latter on each kernel path.
clinfer_test(test_batch SOURCES test_batch.c tiny_model.c)
foreach(path gpu-local-reduce)
  add_test(NAME test_batch_${path} COMMAND test_batch)
  set_tests_properties(test_batch_${path} PROPERTIES LABELS quick SKIP_RETURN_CODE 77
    ENVIRONMENT "${CLINFER_TEST_ENV};CLINFER_KERNEL_PATH=${path}")
endforeach()
# The weight cache: first load writes, later ones map; damaged, stale and unwritable files.
clinfer_test(test_weight_cache SOURCES test_weight_cache.c tiny_model.c)

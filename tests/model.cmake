# The model executor: tiny generated models of every architecture and weight type.
clinfer_test(test_model_tiny SOURCES test_model_tiny.c tiny_model.c)
# The real default model (tools/fetch_model.sh puts it in models/); skipped when absent.
clinfer_test(test_smollm2 SOURCES test_smollm2.c LABELS model
  ENV "CLINFER_TEST_MODELS=${PROJECT_SOURCE_DIR}/models")

# Hidden states and pooled embeddings (clinfer_get_embeddings_*) on a tiny model, both backends;
# the default model's too where CLINFER_MODEL names it.
clinfer_test(test_embeddings SOURCES test_embeddings.c tiny_model.c)
# The log, abort and load-progress callbacks on a tiny model.
clinfer_test(test_callbacks SOURCES test_callbacks.c tiny_model.c)

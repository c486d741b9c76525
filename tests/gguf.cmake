# The GGUF reader: valid files round-trip through the test writer; the hostile corpus, every
# truncation and seeded mutations fail cleanly.
clinfer_test(test_gguf SOURCES test_gguf.c)
clinfer_test(test_gguf_corpus SOURCES test_gguf_corpus.c)

# Sampling, chat templates and the clinfer command line (on a tiny generated model and the
# reference backend: no device or download needed; verify checks OpenCL where there is a device).
clinfer_test(test_sampler SOURCES test_sampler.c)
clinfer_test(test_chat SOURCES test_chat.c)
clinfer_test(test_cli SOURCES test_cli.c tiny_model.c gguf_writer.c ARGS $<TARGET_FILE:clinfer_cli>)

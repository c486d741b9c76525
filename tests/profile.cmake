# The executor's profiler (logits unchanged with CLINFER_PROFILE / CLINFER_TRACE, the trace's
# format, op costs) and `clinfer bench --json --profile` on a tiny model.
clinfer_test(test_profile SOURCES test_profile.c tiny_model.c ARGS $<TARGET_FILE:clinfer_cli>)

# Graph launches (runs of decode ops in one launch on CPU devices) against per-op launches:
# tiny models of every architecture and weight type, and op runs that stop or split.
clinfer_test(test_graph SOURCES test_graph.c tiny_model.c)
# The choice between graph and per-op decode steps, fed synthetic step times.
clinfer_test(test_route SOURCES test_route.c)
# A deadlock between graph launches would hang: fail it instead.
set_tests_properties(test_graph PROPERTIES TIMEOUT 600)

# The numeric ground truth: GGUF block formats and half floats (base/quant.c) and the reference
# backend (backends/reference), each checked against independent computations in the tests.
clinfer_test(test_quant SOURCES test_quant.c)
clinfer_test(test_reference_ops SOURCES test_reference_ops.c)

# clinfer_quantize_file: tiny models quantized to every file type and loaded on every backend
# (types per llama-quantize's rules, error bounds, thread-count independence, BF16 input,
# requantizing).
clinfer_test(test_quantize SOURCES test_quantize.c tiny_model.c)
# The type each tensor gets, on synthetic files (the llama-quantize rules); bad inputs and
# unwritable outputs fail cleanly and leave no file behind.
clinfer_test(test_quant_mix SOURCES test_quant_mix.c)
clinfer_test(test_quantize_errors SOURCES test_quantize_errors.c)

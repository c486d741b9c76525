# The OpenCL matmul/matvec/GEMM and embedding kernels against the reference backend, once per
# kernel path: the GPU paths are forced on whatever device there is, so PoCL proves them too
# (with CLBlast off, which GPU paths would otherwise take for GEMM, so gemm_tiled runs).
clinfer_test(test_cl_matmul SOURCES test_cl_matmul.c ENV CLINFER_KERNEL_PATH=cpu-rows)
foreach(path gpu-local-reduce)
  add_test(NAME test_cl_matmul_${path} COMMAND test_cl_matmul)
  set_tests_properties(test_cl_matmul_${path} PROPERTIES LABELS quick SKIP_RETURN_CODE 77
    ENVIRONMENT "${CLINFER_TEST_ENV};CLINFER_KERNEL_PATH=${path};CLINFER_CLBLAST=0")
endforeach()
# CLBlast's side of f32 GEMM (bias/accumulate through bias_fill, split weights, staged types);
# without CLBlast built in this repeats the default run.
add_test(NAME test_cl_matmul_clblast COMMAND test_cl_matmul)
set_tests_properties(test_cl_matmul_clblast PROPERTIES LABELS quick SKIP_RETURN_CODE 77
  ENVIRONMENT "${CLINFER_TEST_ENV};CLINFER_KERNEL_PATH=cpu-rows;CLINFER_CLBLAST=1")
# bench_ops' correctness mode: every matvec and GEMM it times (SmolLM2 to 8B shapes, every
# weight type, f32 and 8-bit x, CLBlast's side where built), once, against the reference.
add_test(NAME bench_ops_check COMMAND bench_ops --check)
set_tests_properties(bench_ops_check PROPERTIES LABELS quick SKIP_REGULAR_EXPRESSION "no device"
  ENVIRONMENT "${CLINFER_TEST_ENV}")

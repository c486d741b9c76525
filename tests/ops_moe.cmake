# The OpenCL mixture-of-experts ops (routing, the expert-indexed matmul, the gated sum) against
# the reference backend, once per kernel path, and under Oclgrind (small shapes) on both.
clinfer_test(test_cl_moe SOURCES test_cl_moe.c ENV CLINFER_KERNEL_PATH=cpu-rows)
add_test(NAME test_cl_moe_gpu-local-reduce COMMAND test_cl_moe)
set_tests_properties(test_cl_moe_gpu-local-reduce PROPERTIES LABELS quick SKIP_RETURN_CODE 77
  ENVIRONMENT "${CLINFER_TEST_ENV};CLINFER_KERNEL_PATH=gpu-local-reduce")
foreach(path gpu-local-reduce cpu-rows)
  clinfer_oclgrind_test(cl_moe_${path} ENV CLINFER_KERNEL_PATH=${path} CLINFER_TEST_SMALL=1
    COMMAND $<TARGET_FILE:test_cl_moe>)
endforeach()

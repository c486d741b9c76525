# Label rusticl: the OpenCL op suite and a tiny model's `clinfer verify` on Mesa's rusticl, a
# third OpenCL implementation (Debian's mesa-opencl-icd: llvmpipe, a CPU device, OpenCL 3.0 with
# OpenCL C 1.2). tests/rusticl_run.sh gives the ICD loader rusticl's ICD alone, so its device is
# the only one, and skips (77) where rusticl is not installed. The device takes its own path:
# gpu-local-reduce, since llvmpipe cuts a work-item's loops short and the backend's loop probe
# then leaves cpu-rows (backends/opencl/device_setup_cl.c, docs/DEVICES.md). The matmul test runs its
# small grid (CLINFER_TEST_SMALL: n 1 .. 9, 17, 33, a batch of 40, the 8-bit edge tiles, GEMM
# tiles of 193 and 199 columns over k past a block); CLBlast stays off there as on every CPU
# device. Caches of its own in the build tree: clinfer's kernel binaries, and Mesa's shader
# cache, which is the one that counts there (llvmpipe compiles a kernel at its first launch; with
# it cold the label took 355 s of CPU time, warm 31 s, clinfer's cache warm both times).
set(CLINFER_RUSTICL_RUN ${CMAKE_CURRENT_SOURCE_DIR}/rusticl_run.sh)
set(CLINFER_RUSTICL_ENV "CLINFER_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/cl-cache-rusticl"
  "MESA_SHADER_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/mesa-cache-rusticl")

# clinfer_rusticl_test(NAME ENV ... COMMAND ...): COMMAND under rusticl_run.sh.
function(clinfer_rusticl_test name)
  clinfer_runner_test(rusticl ${CLINFER_RUSTICL_RUN} 1800 "${CLINFER_RUSTICL_ENV}" ${name} ${ARGN})
endfunction()

clinfer_rusticl_test(cl_ops ENV CLINFER_TEST_SMALL=1 COMMAND $<TARGET_FILE:test_cl_ops>)
clinfer_rusticl_test(cl_matmul ENV CLINFER_TEST_SMALL=1 COMMAND $<TARGET_FILE:test_cl_matmul>)

# The tiny model of every architecture and rope variant (test_model_tiny's list) op by op
# against the reference: a prompt of 39 tokens (GEMM prefill, past 16 columns), then a decode
# step; the mixtures of experts' routing, expert matmuls and sums among them.
foreach(arch llama qwen2 qwen3 phi3 gemma3 mistral gpt2 llama3 yarn phi3-longrope gemma2 smollm3
    granite olmo2 qwen3moe olmoe mixtral gpt-oss)
  set(file ${CMAKE_CURRENT_BINARY_DIR}/rusticl_${arch}.gguf)
  add_test(NAME rusticl_tiny_${arch} COMMAND write_tiny_model ${file} ${arch})
  set_tests_properties(rusticl_tiny_${arch} PROPERTIES LABELS rusticl
    FIXTURES_SETUP rusticl_${arch})
  clinfer_rusticl_test(verify_${arch} COMMAND $<TARGET_FILE:clinfer_cli> verify -m ${file} -n 40)
  set_tests_properties(rusticl_verify_${arch} PROPERTIES FIXTURES_REQUIRED rusticl_${arch})
endforeach()

# The default model ($CLINFER_MODEL; skipped without it): verify, and the greedy answer equal to
# PoCL's. The script calls rusticl_run.sh itself, for the rusticl half only.
add_test(NAME rusticl_default_model
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/rusticl_model.sh $<TARGET_FILE:clinfer_cli>)
set_tests_properties(rusticl_default_model PROPERTIES LABELS rusticl SKIP_RETURN_CODE 77
  TIMEOUT 1200 ENVIRONMENT "${CLINFER_RUSTICL_ENV}")

# Layers split across two platforms: PoCL's CPU device and rusticl's llvmpipe, both ICDs loaded
# (test_split --cross: a tiny model's logits split by shares and -ngl as on PoCL alone, in steps
# and batches, and verify on the split; tests/split.cmake has the two-PoCL-device case).
add_test(NAME rusticl_split COMMAND test_split --cross)
set_tests_properties(rusticl_split PROPERTIES LABELS rusticl SKIP_RETURN_CODE 77 TIMEOUT 1200
  ENVIRONMENT "${CLINFER_RUSTICL_ENV};RUSTICL_ENABLE=swrast;OCL_ICD_VENDORS=/etc/OpenCL/vendors")

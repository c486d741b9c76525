# Label oclgrind: the OpenCL op and matmul tests and an end-to-end `clinfer run` under Oclgrind,
# an OpenCL 1.2 simulator that presents itself as a GPU (so the device layer picks
# gpu-local-reduce) and checks every memory access. PoCL runs a work-group's items in lock-step
# and hides races that a GPU shows; Oclgrind reports them. tests/oclgrind_run.sh fails a test on
# any report (data race, invalid access, API misuse, barrier divergence) and skips (77) where
# oclgrind is not installed. Oclgrind interprets every work-item, so the matmul test runs its
# smaller grid (CLINFER_TEST_SMALL). The whole label takes about half an hour on 2 cores; a new
# weight type alone: CLINFER_TEST_TYPES=Q5_K ctest -R oclgrind_cl_matmul (tests/weight_types.h).
#
# Kernel paths: gpu-local-reduce (the simulator's own) and cpu-rows (forced).
# --uninitialized is not used: Oclgrind 21.10 crashes on some of our kernels with it.
set(CLINFER_OCLGRIND_RUN ${CMAKE_CURRENT_SOURCE_DIR}/oclgrind_run.sh)
set(CLINFER_OCLGRIND_ENV "CLINFER_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/cl-cache-oclgrind")

# clinfer_oclgrind_test(NAME ENV ... COMMAND ...): COMMAND under oclgrind_run.sh.
function(clinfer_oclgrind_test name)
  clinfer_runner_test(oclgrind ${CLINFER_OCLGRIND_RUN} 1800 "${CLINFER_OCLGRIND_ENV}" ${name} ${ARGN})
endfunction()

foreach(path gpu-local-reduce cpu-rows)
  # CLINFER_TEST_SMALL: fewer sliding-window and head_dim 256 attention cases
  clinfer_oclgrind_test(cl_ops_${path} ENV CLINFER_KERNEL_PATH=${path} CLINFER_TEST_SMALL=1
    COMMAND $<TARGET_FILE:test_cl_ops>)
  # CLBlast off: the GPU path would take it for f32 GEMM, and gemm_tiled is ours to check. The
  # weight types in four shards (tests/weight_types.h): 13 types on gpu-local-reduce ran past the
  # 30-minute limit in one test on a quiet machine.
  foreach(shard 0 1 2 3)
    clinfer_oclgrind_test(cl_matmul_${path}_${shard}
      ENV CLINFER_KERNEL_PATH=${path} CLINFER_CLBLAST=0 CLINFER_TEST_SMALL=1
          CLINFER_TEST_SHARD=${shard}/4
      COMMAND $<TARGET_FILE:test_cl_matmul>)
  endforeach()
endforeach()

# matvec_il_n (f32 x over rows interleaved by 16, 2 .. 16 columns) builds on every device, but
# weights take that layout only where the integer kernels over it exist (AVX2 hosts): forced here,
# for the three types it reads.
clinfer_oclgrind_test(cl_matmul_il
  ENV CLINFER_KERNEL_PATH=cpu-rows CLINFER_INTERLEAVE=force CLINFER_TEST_SMALL=1
      CLINFER_TEST_TYPES=Q8_0,Q4_0,Q4_1
  COMMAND $<TARGET_FILE:test_cl_matmul>)

# The tiny model end to end, a prompt of more than 8 tokens so that prefill is a GEMM. Per-op
# launches on the simulator's own path (CLBlast's GEMM included); graph launches (cl/graph.cl)
# need cpu-rows and CLINFER_GRAPH=1, since they run only on CPU devices otherwise. Oclgrind runs
# one work-group after another, so the first takes every task: every access of the graph kernel
# is checked, but not the hand-over between work-groups, which rests on PoCL's coherent memory.
set(CLINFER_OCLGRIND_MODEL ${CMAKE_CURRENT_BINARY_DIR}/oclgrind_tiny.gguf)
add_test(NAME oclgrind_tiny_model COMMAND write_tiny_model ${CLINFER_OCLGRIND_MODEL})
set_tests_properties(oclgrind_tiny_model PROPERTIES LABELS oclgrind FIXTURES_SETUP oclgrind_model)
set(CLINFER_OCLGRIND_PROMPT "the same transformer runs on any vendor's device")
# CLINFER_PROFILE's table has a graph row exactly when graph launches ran. The graph test passes
# on that row (CTest then ignores the exit status, so the wrapper's failure lines fail it).
clinfer_oclgrind_test(run_per_op ENV CLINFER_GRAPH=0 CLINFER_PROFILE=1
  COMMAND $<TARGET_FILE:clinfer_cli> run -m ${CLINFER_OCLGRIND_MODEL} -p ${CLINFER_OCLGRIND_PROMPT}
          -n 4)
clinfer_oclgrind_test(run_graph ENV CLINFER_KERNEL_PATH=cpu-rows CLINFER_GRAPH=1 CLINFER_PROFILE=1
  COMMAND $<TARGET_FILE:clinfer_cli> run -m ${CLINFER_OCLGRIND_MODEL} -p ${CLINFER_OCLGRIND_PROMPT}
          -n 4)
# Rows interleaved by 16 (forced, as AVX2 hosts lay them out) and a prompt of 6 tokens: the
# prompt's matmuls also run in graph launches (f32 x over interleaved rows, several columns, as a
# batch of sequences' decode steps do).
clinfer_oclgrind_test(run_graph_il ENV CLINFER_KERNEL_PATH=cpu-rows CLINFER_GRAPH=1
  CLINFER_INTERLEAVE=force CLINFER_PROFILE=1
  COMMAND $<TARGET_FILE:clinfer_cli> run -m ${CLINFER_OCLGRIND_MODEL} -p "any device" -n 4)
set_tests_properties(oclgrind_run_per_op oclgrind_run_graph oclgrind_run_graph_il PROPERTIES
  FIXTURES_REQUIRED oclgrind_model SKIP_REGULAR_EXPRESSION "oclgrind is not installed")
# The same for a tiny gemma3 (a sliding window of 4 on two of its three layers, GEGLU, the
# embedding scale, post-norms), the prompt longer than the window.
set(CLINFER_OCLGRIND_GEMMA3 ${CMAKE_CURRENT_BINARY_DIR}/oclgrind_gemma3.gguf)
add_test(NAME oclgrind_tiny_gemma3 COMMAND write_tiny_model ${CLINFER_OCLGRIND_GEMMA3} gemma3)
set_tests_properties(oclgrind_tiny_gemma3 PROPERTIES LABELS oclgrind
  FIXTURES_SETUP oclgrind_gemma3)
clinfer_oclgrind_test(run_per_op_gemma3 ENV CLINFER_GRAPH=0 CLINFER_PROFILE=1
  COMMAND $<TARGET_FILE:clinfer_cli> run -m ${CLINFER_OCLGRIND_GEMMA3} -p ${CLINFER_OCLGRIND_PROMPT}
          -n 4)
clinfer_oclgrind_test(run_graph_gemma3 ENV CLINFER_KERNEL_PATH=cpu-rows CLINFER_GRAPH=1
  CLINFER_PROFILE=1
  COMMAND $<TARGET_FILE:clinfer_cli> run -m ${CLINFER_OCLGRIND_GEMMA3} -p ${CLINFER_OCLGRIND_PROMPT}
          -n 4)
set_tests_properties(oclgrind_run_per_op_gemma3 oclgrind_run_graph_gemma3 PROPERTIES
  FIXTURES_REQUIRED oclgrind_gemma3 SKIP_REGULAR_EXPRESSION "oclgrind is not installed")
set_tests_properties(oclgrind_run_per_op oclgrind_run_per_op_gemma3 PROPERTIES
  FAIL_REGULAR_EXPRESSION "\n  graph ")
set_tests_properties(oclgrind_run_graph oclgrind_run_graph_gemma3 PROPERTIES
  PASS_REGULAR_EXPRESSION "\n  graph +[0-9]" FAIL_REGULAR_EXPRESSION "oclgrind_run:")
# run_graph_il: every matmul in graph launches (none launched on its own)
set_tests_properties(oclgrind_run_graph_il PROPERTIES
  PASS_REGULAR_EXPRESSION "\n  matmul +[0-9]+ +0 " FAIL_REGULAR_EXPRESSION "oclgrind_run:")
# oclgrind_graph_model(NAME [ENV VAR=VALUE...] ARGS...): a tiny model written by
# `write_tiny_model FILE ARGS...` that the CLI decodes in graph launches under Oclgrind
# (oclgrind_run_graph_NAME, with ENV), passing only when the profile shows graph launches.
function(oclgrind_graph_model name)
  cmake_parse_arguments(G "" "" "ENV" ${ARGN})
  set(file ${CMAKE_CURRENT_BINARY_DIR}/oclgrind_${name}.gguf)
  add_test(NAME oclgrind_tiny_${name} COMMAND write_tiny_model ${file} ${G_UNPARSED_ARGUMENTS})
  set_tests_properties(oclgrind_tiny_${name} PROPERTIES LABELS oclgrind
    FIXTURES_SETUP oclgrind_${name})
  clinfer_oclgrind_test(run_graph_${name} ENV CLINFER_KERNEL_PATH=cpu-rows CLINFER_GRAPH=1
    CLINFER_PROFILE=1 ${G_ENV}
    COMMAND $<TARGET_FILE:clinfer_cli> run -m ${file} -p ${CLINFER_OCLGRIND_PROMPT} -n 4)
  set_tests_properties(oclgrind_run_graph_${name} PROPERTIES FIXTURES_REQUIRED oclgrind_${name}
    SKIP_REGULAR_EXPRESSION "oclgrind is not installed" PASS_REGULAR_EXPRESSION "\n  graph +[0-9]"
    FAIL_REGULAR_EXPRESSION "oclgrind_run:")
endfunction()
# A model mixing weight types (Q4_K_M's Q4_K and Q6_K, with Q8_0 and F16): one program holding
# each type's readers under its own names (cl/graph_typed.clh).
oclgrind_graph_model(mix llama Q4_K+Q6_K+Q8_0+F16)
# A tiny gpt2: its layer norms (rounding their output for the 8-bit matmul after them), biases,
# KV cache stores, the ADD of the position rows and GELU, in the graph.
oclgrind_graph_model(gpt2 gpt2)
# Rows interleaved by 16 (as on CPUs) under the f32 activations of models below 1B parameters:
# graph.cl's matmuls over them (CL_MM_IL_F32, matvec_il_n's rows).
oclgrind_graph_model(il_f32 ENV CLINFER_INTERLEAVE=force llama Q4_1+Q8_0+Q4_0)
# The rope variants' pair factors (Llama 3's rope_freqs) and magnitude (phi3's longrope, with its
# long table: the context exceeds its original 64 positions) in rope.cl's prefill rotation and in
# the graph's attention records.
oclgrind_graph_model(llama3 llama3)
oclgrind_graph_model(longrope phi3-longrope)
# oclgrind_tiny_arch(ARCH): the tiny model of an architecture (write_tiny_model FILE ARCH)
# decoded op by op on the simulator's own path (oclgrind_tiny_ARCH_per_op: gpu-local-reduce's
# kernels) and in graph launches (oclgrind_tiny_ARCH_graph, passing only when the profile shows
# them), so that `ctest -L oclgrind -R tiny` checks each one's kernels on both routes.
function(oclgrind_tiny_arch arch)
  set(file ${CMAKE_CURRENT_BINARY_DIR}/oclgrind_${arch}.gguf)
  add_test(NAME oclgrind_tiny_${arch} COMMAND write_tiny_model ${file} ${arch})
  set_tests_properties(oclgrind_tiny_${arch} PROPERTIES LABELS oclgrind
    FIXTURES_SETUP oclgrind_${arch})
  clinfer_oclgrind_test(tiny_${arch}_per_op ENV CLINFER_GRAPH=0 CLINFER_PROFILE=1
    COMMAND $<TARGET_FILE:clinfer_cli> run -m ${file} -p ${CLINFER_OCLGRIND_PROMPT} -n 4)
  clinfer_oclgrind_test(tiny_${arch}_graph ENV CLINFER_KERNEL_PATH=cpu-rows CLINFER_GRAPH=1
    CLINFER_PROFILE=1
    COMMAND $<TARGET_FILE:clinfer_cli> run -m ${file} -p ${CLINFER_OCLGRIND_PROMPT} -n 4)
  set_tests_properties(oclgrind_tiny_${arch}_per_op oclgrind_tiny_${arch}_graph PROPERTIES
    FIXTURES_REQUIRED oclgrind_${arch} SKIP_REGULAR_EXPRESSION "oclgrind is not installed")
  set_tests_properties(oclgrind_tiny_${arch}_per_op PROPERTIES FAIL_REGULAR_EXPRESSION "\n  graph ")
  set_tests_properties(oclgrind_tiny_${arch}_graph PROPERTIES PASS_REGULAR_EXPRESSION
    "\n  graph +[0-9]" FAIL_REGULAR_EXPRESSION "oclgrind_run:")
endfunction()
# gemma2's soft-caps (the attention kernels' and the SCALE op's), smollm3's layer without
# rotation (cache stores beside rotating layers), granite's scales, olmo2's norms over whole q
# and k rows and its window, gpt-oss's sinks (attention and merge kernels, the graph's records)
# and clamped SwiGLU.
foreach(arch gemma2 smollm3 granite olmo2 gpt-oss)
  oclgrind_tiny_arch(${arch})
endforeach()

"""`clinfer serve` on the default model ($CLINFER_MODEL; skipped, 77, without it) on OpenCL:
its own chat template, a streamed greedy answer equal to the whole one, and two clients at once
getting what each gets alone, and a tool call with tool_choice "required" whose arguments meet
the function's schema. Together their tokens share each step's batch (two columns per
matrix product instead of one, other kernels): the logits may differ in the last bits
(tests/test_batch.c bounds it), far below the margins of these short greedy answers.
Usage: test_serve_model.py CLINFER"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_fixture import Server, chat_text, check, finish, run_threads, streamed_text  # noqa

model = os.environ.get("CLINFER_MODEL")
if not model or not os.path.exists(model):
    print("skipped: no $CLINFER_MODEL")
    sys.exit(77)
s = Server(sys.argv[1], model, "-np", "2", "-c", "512", "-q")
try:
    CHAT = "/v1/chat/completions"
    reqs = [{"messages": [{"role": "user", "content": q}], "max_tokens": 8, "temperature": 0}
            for q in ("What is the capital of France?", "Name a color.")]
    alone = [s.request("POST", CHAT, r) for r in reqs]
    check(all(st == 200 for st, _ in alone), f"answers: {alone}")
    if all(st == 200 for st, _ in alone):
        st, events, done = s.stream(CHAT, reqs[0])
        check(done and streamed_text(events, True) == chat_text(alone[0][1]),
              f"streamed {streamed_text(events, True)!r} != {chat_text(alone[0][1])!r}")
        together = [None, None]

        def run(i):
            together[i] = s.request("POST", CHAT, reqs[i])

        run_threads(2, run)
        check([chat_text(b) for _, b in alone] == [chat_text(b) for _, b in together],
              f"two at once {together} differ from alone {alone}")
        print("answers:", [chat_text(b) for _, b in alone], flush=True)
    # tool_choice "required": the small model's call is grammar-constrained, so its arguments
    # parse and meet the function's schema (ChatML: Hermes' <tool_call> format)
    schema = {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
              "properties": {"city": {"type": "string", "maxLength": 20},
                             "unit": {"enum": ["celsius", "fahrenheit"]}}}
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": schema}}]
    for seed in range(3):
        st, r = s.request("POST", CHAT, {"messages": [{"role": "user", "content":
                                                       "What is the weather like in Paris?"}],
                                         "tools": tools, "tool_choice": "required",
                                         "max_tokens": 100, "seed": seed})
        calls = r["choices"][0]["message"].get("tool_calls") if st == 200 else None
        args = json.loads(calls[0]["function"]["arguments"]) if calls else None
        check(st == 200 and r["choices"][0]["finish_reason"] == "tool_calls" and
              calls[0]["function"]["name"] == "get_weather" and isinstance(args, dict) and
              set(args) == {"city", "unit"} and isinstance(args["city"], str) and
              len(args["city"]) <= 20 and args["unit"] in ("celsius", "fahrenheit"),
              f"tool call {seed}: {st} {r}")
        print("tool call:", calls and calls[0]["function"], flush=True)
finally:
    code = s.stop()
check(code == 0, f"exit {code}")
finish("test_serve_model")

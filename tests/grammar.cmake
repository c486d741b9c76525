# Constrained sampling (src/grammar*.c, src/json_schema.c): the GBNF parser and matcher on a
# corpus of grammars, token masks against brute force, JSON schemas to grammars and a tiny
# model's constrained generation.
clinfer_test(test_grammar SOURCES test_grammar.c)
clinfer_test(test_grammar_mask SOURCES test_grammar_mask.c)
clinfer_test(test_json_schema SOURCES test_json_schema.c tiny_model.c)

#!/usr/bin/env python3
"""Writes the seed corpus of transform_engine_fuzz (fuzz/corpus/transform_engine/).

An input is, in FuzzedDataProvider's encoding (fuzz/transform_engine_fuzz.cc, Read): the
expression, the payload, the topic, the text (the source name, the row id and the tester's clock)
and header name/value pairs as random-length strings (a backslash doubled, each ended by a
backslash and a space), then 6 bytes read from the end: the attempt (2 bytes, low first), the
onError strategy and flags, the depth, the timeout and the path (0 admin, 1 relay, 2 source).

The seeds: every golden case (src/transform/testdata/golden.json) and documented example
(tests/vendor/queuebox/transform_examples.json), each on one of the three paths in turn, and the
edges below. Run from the repository root: python3 fuzz/transform_engine_seeds.py
"""
import hashlib
import json
import os
import sys

OUT = "fuzz/corpus/transform_engine"


def field(value):
    data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    return data.replace(b"\\", b"\\\\") + b"\\ "


def seed(expr, payload, topic="order.created", text="orders", headers=(), path=0, timeout=40,
         depth=100, strategy=0, attempt=0):
    out = field(expr) + field(payload) + field(topic) + field(text)
    for name, value in headers:
        out += field(name) + field(value)
    # The target reads the depth as 1 + byte % 160 and a stage's timeout as 1 + byte % 64 ms.
    return out + bytes([attempt & 0xFF, attempt >> 8, strategy, depth - 1, timeout, path])


EDGES = [
    # name, expression, payload, extra arguments
    ("deep_parens", "(" * 1000 + "1" + ")" * 1000, "{}", {}),
    ("deep_array_payload", "$", "[" * 1000 + "]" * 1000, {"path": 1}),
    ("deep_object_expr", '{"a":' * 300 + "1" + "}" * 300, "{}", {"path": 2}),
    ("catastrophic_regex", '$match("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", /^(a+)+$/)', "{}",
     {"timeout": 10}),
    ("endless_recursion", "($f := function($x){ $f($x + 1) }; $f(0))", "{}", {"path": 1}),
    ("tail_loop", "($f := function($x){ $x > 1e12 ? $x : $f($x + 1) }; $f(0))", "{}",
     {"path": 2, "timeout": 5}),
    ("big_range", "[1..10000000]", "{}", {"strategy": 1}),
    ("long_string", '$pad("x", 100000000)', "{}", {"path": 1, "strategy": 2}),
    ("lone_surrogate_split", '$split(name, "")', '{"name":"\U0001F600 ok"}', {"path": 1}),
    ("lone_surrogate_match", "$match(name, /./).match", '{"name":"\U0001F600"}', {}),
    ("lone_surrogate_key", '{$split(name, "")[0]: 1}', '{"name":"\U0001F600"}', {"path": 2}),
    ("payload_not_utf8", "$", b'{"a":"\xff\xfe"}', {"path": 1}),
    ("topic_not_utf8", "$topic", "{}", {"path": 1, "topic": b"order.\xc3"}),
    ("payload_bom", "$", b"\xef\xbb\xbf{\"a\":1}", {"path": 1}),
    ("payload_not_json", "$.a", "{a:1}", {"path": 2, "strategy": 2}),
    ("numbers", "$", '[1e400,-0,12345678901234567890,1e-400,0.1,-9223372036854775809]',
     {"path": 1}),
    ("duplicate_keys", "$", '{"a":1,"a":2,"__proto__":{"x":1},"1":3}', {}),
    ("controls", "[$topic, $source]", '"\\u0000\\u2028"',
     {"topic": "a\u2028b\u0001\"\\", "text": "s\u2029\n", "strategy": 1}),
    ("headers", "$headers", "{}", {"path": 2, "headers": [("X-A", "1"), ("x-a", "2"),
                                                          (b"\xff", b"v\xfe"), ("", "")],
                                   "strategy": 12}),
    ("error_function", '$error("stop")', "{}", {"path": 1, "strategy": 2}),
    ("assert", '$assert(false, "no")', "{}", {"path": 2}),
    ("eval_refused", '$eval("1+1")', "{}", {}),
    ("js_function_text", "$string($string)", "{}", {"path": 1}),
    ("timeout_clamped", '($f := function($x){ $f($x) }; $f(0))', "{}", {"timeout": 250}),
    ("depth_one", "$sum([1,2])", "{}", {"path": 1, "depth": 1}),
    ("timestamp_text", "$timestamp", "{}", {"text": "2026-12-06T02:00:00.100000000Z"}),
    ("result_function", "$sum", "{}", {"path": 2}),
    ("undefined", "nothing", "{}", {"path": 1}),
    ("syntax_error", "order.items[", "{}", {"path": 2}),
    ("unknown_function", "$nope(1)", "{}", {"strategy": 2}),
    # transform_engine_fuzz's finding at 7,086 executions (a 503 from the admin route).
    ("regex_javascript_refuses", "$replace('a b\\tc', /\\s?+/, '_')", "",
     {"strategy": 9, "attempt": 2}),
    ("base64", '$base64decode($base64encode("\u00e9\U0001F600"))', "{}", {"path": 1}),
]


def as_text(value):
    return value if isinstance(value, (bytes, str)) else json.dumps(value, ensure_ascii=False)


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {}
    golden = json.load(open("src/transform/testdata/golden.json"))
    examples = json.load(open("tests/vendor/queuebox/transform_examples.json"))
    for i, case in enumerate(golden + examples):
        payload = json.dumps(case["input"], ensure_ascii=False) if "input" in case else ""
        data = seed(case["expr"], payload, topic=case.get("topic") or "order.created", path=i % 3,
                    depth=case.get("maxDepth", 100), strategy=i % 16, attempt=i % 7)
        seeds["case_" + hashlib.sha1(data).hexdigest()[:12]] = data
    for name, expr, payload, extra in EDGES:
        extra = dict(extra)
        for key in ("topic", "text"):
            if key in extra:
                extra[key] = as_text(extra[key])
        seeds[name] = seed(expr, payload, **extra)
    for name in os.listdir(OUT):
        os.remove(os.path.join(OUT, name))
    for name, data in seeds.items():
        if len(data) > 4096:
            sys.exit(f"{name}: {len(data)} bytes, over fuzz.sh's -max_len=4096")
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"{len(seeds)} seeds in {OUT}")


if __name__ == "__main__":
    main()

"""Regenerates the golden files the Go tests of package sls compare against.

It needs PyYAML (any 5.x/6.x: the YAML 1.1 resolvers and constructors have not changed)
and reproduces Salt's loader (salt/utils/yamlloader.py, Salt 3006): construct_scalar
strips the leading zeros of an unsigned "0..." integer, and timestamps stay strings.

    python3 gen_golden.py   # writes scalars.json, floats.json, fnmatch.json

The random cases use a fixed seed, so the files only change when this script does.
"""
import fnmatch
import json
import math
import random
import struct

import yaml

BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SaltLoader(BaseLoader):
    def construct_scalar(self, node):
        if node.tag == "tag:yaml.org,2002:int":
            if node.value == "0":
                pass
            elif node.value.startswith("0") and not node.value.startswith(("0b", "0x")):
                node.value = node.value.lstrip("0")
                if node.value == "":
                    node.value = "0"
        return super().construct_scalar(node)


SaltLoader.add_constructor("tag:yaml.org,2002:timestamp", SaltLoader.construct_scalar)


def typed(v):
    if v is None:
        return {"null": True}
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": str(v)}
    if isinstance(v, float):
        if math.isinf(v) or math.isnan(v):
            return {"notjson": True}
        return {"float": repr(v)}
    if isinstance(v, str):
        return {"str": v}
    return {"other": type(v).__name__}


def plain(s):
    """The value Salt's loader builds for s as a plain scalar."""
    loader = SaltLoader("")
    tag = loader.resolve(yaml.ScalarNode, s, (True, False))
    node = yaml.ScalarNode(tag, s)
    try:
        return typed(loader.construct_object(node, deep=True))
    except Exception as exc:  # noqa: BLE001 - any failure is "Salt fails on it"
        return {"error": type(exc).__name__}


HAND = """
yes Yes YES no No NO true True TRUE false False FALSE on On ON off Off OFF
y Y n N yEs tRUE oN
~ null Null NULL nULL
0 00 000 010 -010 +010 0_10 08 09 -08 0o17 0b101 -0b101 0x1F 0X1F -0x_1F 0b_ 0x_ 0_ -0_
1_000 +1 -0 +0 1:30 -1:30 1:30:00 190:20:30 1:60 1:5 01:30 1:-5
12345678901234567890123 -98765432109876543210 0x123456789abcdef0123
1.5 1. .5 -.5 +.5 1.0e3 1.0e+3 1.0E-3 1e3 1_000.5 1:30.5 1:30. -1:30.5
.inf -.inf +.inf .Inf .INF .nan .NaN .NAN -.nan 1.0e+400 1.0e-400
2001-12-14 2001-12-14t21:59:43.10-05:00 2001-12-14 21:59:43.10 -5
= << <<< ==
abc 0.0 -0.0 1e+16 0.1 123.456e+10 9_9.9_9 1__2 _1 1_ 0._5
""".split()
HAND += ["", "2001-12-14 21:59:43.10 -5", "1.0e+3 ", "3.14159265358979323846"]


def rand_scalars(n):
    rnd = random.Random(9)
    alphabet = "0123456789_:.-+eExXbBoO"
    out = []
    for _ in range(n):
        k = rnd.randint(1, 8)
        out.append("".join(rnd.choice(alphabet) for _ in range(k)))
    return out


def main():
    cases = []
    seen = set()
    for s in HAND + rand_scalars(4000):
        if s in seen:
            continue
        seen.add(s)
        cases.append({"in": s, "want": plain(s)})
    with open("scalars.json", "w") as f:
        json.dump(cases, f, indent=0, ensure_ascii=False)
        f.write("\n")

    rnd = random.Random(7)
    floats = []
    for special in [0.0, -0.0, 1.0, 0.1, 1e16, 1e15, 1e-4, 1e-5, 123456789012345678.0,
                    2.0 ** 60, 5e-324, 1.7976931348623157e308, 0.30000000000000004]:
        floats.append(special)
    for _ in range(3000):
        bits = rnd.getrandbits(64)
        f = struct.unpack("<d", struct.pack("<Q", bits))[0]
        if math.isinf(f) or math.isnan(f):
            continue
        floats.append(f)
    for _ in range(1000):
        floats.append(rnd.uniform(-1e6, 1e6))
        floats.append(float(rnd.randint(-10**18, 10**18)))
    with open("floats.json", "w") as f:
        json.dump([{"bits": str(struct.unpack("<Q", struct.pack("<d", x))[0]), "repr": repr(x)} for x in floats], f, indent=0)
        f.write("\n")

    rnd = random.Random(5)
    pats = ["*", "web*", "web?", "db[0-9]", "db[!0-9]", "[]a]", "[!]a]", "[a-]", "[-a]", "[z-a]",
            "[a-c-e]", "[!]", "[", "a[", "[^a]", "[\\]", "a\\*", "**", "[a-z0-9]*.example.com",
            "[z-ab]", "[!-z]", "[a-b-]", "[[]", "[&|~]"]
    names = ["web1", "web", "db1", "dbx", "]", "a", "-", "z", "b", "c", "d", "e", "!", "^", "\\",
             "[", "a*", "a\\*", "ab", "web1.example.com", "&", "|", "~", "", "\n", "web\n1"]
    alphabet = "ab-![]*?^\\z"
    for _ in range(600):
        pats.append("".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 7))))
    for _ in range(60):
        names.append("".join(rnd.choice("ab-![]^\\z") for _ in range(rnd.randint(0, 4))))
    fn = []
    for p in pats:
        try:
            m = [n for n in names if fnmatch.fnmatchcase(n, p)]
        except Exception:  # noqa: BLE001
            continue
        fn.append({"pat": p, "matches": m})
    with open("fnmatch.json", "w") as f:
        json.dump({"names": names, "cases": fn}, f, indent=0, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()

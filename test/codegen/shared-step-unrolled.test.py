"""A block step's compute in PTX: its FMAs and shared loads in total, and
the longest run of them with nothing else between (no loop counter,
compare, branch or label)."""
import sys

text = open(sys.argv[1]).read()
lines = [l.strip() for l in text[text.index(".entry s2_c(") :].splitlines()]
fma = sum(l.startswith("fma.rn.f32") for l in lines)
lds = [l for l in lines if l.startswith("ld.shared")]
print("fma", fma, "shared loads", len(lds), "v4", sum(l.startswith("ld.shared.v4.f32") for l in lds))
longest = run = 0
for l in lines:
    if l.startswith("fma.rn.f32"):
        run += 1
        longest = max(longest, run)
    elif not l.startswith("ld.shared"):
        run = 0
print("longest straight run of FMAs", longest)

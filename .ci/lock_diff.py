"""Print the packages whose installed version (pip freeze on stdin) differs from the lock given as
the first argument, one `name: locked → installed` line each (`(none)` when absent); used by
`RG_UNPINNED=1 bash .ci/run`."""
import re
import sys


def pins(lines):
    out = {}
    for line in lines:
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", line.strip())
        if m:
            out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2).split("+")[0]
    return out


lock = pins(open(sys.argv[1], encoding="utf-8"))
now = pins(sys.stdin)
diff = [(n, lock.get(n, "(none)"), now.get(n, "(none)")) for n in sorted(set(lock) | set(now))
        if lock.get(n) != now.get(n) and n != "pip"]  # pip itself comes with the venv
for name, a, b in diff:
    print(f"  {name}: {a} → {b}")
print(f"  {len(diff)} difference(s)")

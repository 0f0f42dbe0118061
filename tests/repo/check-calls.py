#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check-calls.py MAX OBJECT...: the circles of calls between the source
files of one module, read from their object files with nm: file a calls
file b when a function b defines is undefined in a (a call, or its
address taken; the private header's inline functions count where they
are compiled in). Prints every circle of more than one file, and fails
when one spans more than MAX files (docs/ARCHITECTURE.md, "Inside the
messaging service")."""
import os
import subprocess
import sys


def symbols(obj, *flags):
    out = subprocess.run(["nm", *flags, obj], check=True,
                         capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[-2] in ("T", "U"):
            names.add(parts[-1])
    return names


def circles(graph):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def main():
    limit, objs = int(sys.argv[1]), sys.argv[2:]
    name = {o: os.path.basename(o).replace(".c.o", ".c") for o in objs}
    defined = {o: symbols(o, "--defined-only", "-g") for o in objs}
    undefined = {o: symbols(o, "-u") for o in objs}
    owner = {s: o for o in objs for s in defined[o]}
    graph = {name[o]: set() for o in objs}
    for o in objs:
        for s in undefined[o]:
            if s in owner and owner[s] != o:
                graph[name[o]].add(name[owner[s]])
    worst = 1
    for comp in circles(graph):
        if len(comp) > 1:
            print("circle of %d files: %s" % (len(comp), " ".join(comp)))
            worst = max(worst, len(comp))
    print("%d files; the largest circle spans %d (at most %d allowed)" %
          (len(objs), worst, limit))
    return 1 if worst > limit else 0


if __name__ == "__main__":
    sys.exit(main())

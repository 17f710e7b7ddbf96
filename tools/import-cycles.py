#!/usr/bin/env python3
"""Fails when modules of a Rust crate import each other in a cycle (`crate::` and `super::` paths, tests excluded).

usage: tools/import-cycles.py SRC_DIR [SRC_DIR ...]   (make lint runs it on every crate of the workspace)
"""
import os
import re
import sys


def check(root):
    mods={}
    for dp,dn,fn in os.walk(root):
        for f in fn:
            if not f.endswith('.rs') or 'bin' in dp.split(os.sep): continue
            p=os.path.join(dp,f)
            rel=os.path.relpath(p,root)[:-3]
            parts=rel.split(os.sep)
            if parts[-1] in ('mod','lib','main'): parts=parts[:-1]
            mod='::'.join(parts) or 'crate'
            text=open(p).read()
            text=text.split('#[cfg(test)]')[0]
            # Paths in comments and doc comments are not imports.
            text=re.sub(r'//[^\n]*', '', text)
            deps=set()
            for m in re.finditer(r'crate::([a-z_]+(?:::[a-z_]+)?)',text):
                deps.add(m.group(1))
            for m in re.finditer(r'\bsuper::([a-z_]+)',text):
                par='::'.join(parts[:-1])
                deps.add((par+'::' if par else '')+m.group(1))
            mods[mod]=deps
    names=set(mods)
    def norm(d):
        # map dep path to the longest known module
        while d and d not in names:
            d='::'.join(d.split('::')[:-1])
        return d
    graph={m:{norm(d) for d in ds if norm(d) and norm(d)!=m} for m,ds in mods.items()}
    # longer cycles: strongly connected components
    index={};low={};stack=[];on=set();sccs=[];i=[0]
    sys.setrecursionlimit(10000)
    def strong(v):
        index[v]=low[v]=i[0];i[0]+=1;stack.append(v);on.add(v)
        for w in graph.get(v,()):
            if w not in index: strong(w);low[v]=min(low[v],low[w])
            elif w in on: low[v]=min(low[v],index[w])
        if low[v]==index[v]:
            comp=[]
            while True:
                w=stack.pop();on.discard(w);comp.append(w)
                if w==v:break
            if len(comp)>1: sccs.append(comp)
    for v in graph:
        if v not in index: strong(v)
    for comp in sccs:
        print(f'{root}: import cycle: ' + ' -> '.join(sorted(comp)))
    return not sccs


if __name__ == '__main__':
    results = [check(root) for root in sys.argv[1:]]
    sys.exit(0 if all(results) else 1)

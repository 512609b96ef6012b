#!/usr/bin/env python3
"""Writes splice_cases.json: JSON objects, changes to them, and the text Substation's SJSON
leaves, for engine/src/json/splice.rs's test.

The functions model SJSON's top-level set and delete as sjson.go applies them (a value
replaced in place; a new key appended before the closing brace, after the white space
there, with a comma when the object is not empty; a key deleted with the comma before it,
or the first one with the white space before it and the comma after it), applied one after
the other, as Substation's transforms call them. The Rust side rebuilds the text from what
changed, in one pass; the two agree unless the object is emptied of its original members
(or had none) and a key is deleted: the spacing left inside the braces then depends on the
order of the calls. The cases leave those out.

    python3 engine/src/json/testdata/splice_model.py > engine/src/json/testdata/splice_cases.json
"""
import random, itertools, json

def members(buf):
    # (key, key_start, value_start, value_end) of a top-level object's members
    out = []; i = 1; n = len(buf)
    def ws(i):
        while i < n and buf[i] in ' \t\r\n': i += 1
        return i
    def skip_str(i):
        i += 1
        while buf[i] != '"':
            i += 2 if buf[i] == '\\' else 1
        return i + 1
    def skip_val(i):
        if buf[i] == '"': return skip_str(i)
        if buf[i] in '{[':
            depth = 0
            while True:
                c = buf[i]
                if c == '"': i = skip_str(i); continue
                if c in '{[': depth += 1
                if c in '}]':
                    depth -= 1
                    if depth == 0: return i + 1
                i += 1
        while i < n and buf[i] not in ',}] \t\r\n': i += 1
        return i
    i = ws(1)
    while buf[i] != '}':
        ks = i; ke = skip_str(i); key = buf[ks+1:ke-1]
        i = ws(ke); assert buf[i] == ':'; i = ws(i + 1)
        vs = i; ve = skip_val(i)
        out.append((key, ks, vs, ve))
        i = ws(ve)
        if buf[i] == ',': i = ws(i + 1)
    return out

def delete_tail(buf):
    # deleteTailItem: returns (buf, delNextComma)
    i = len(buf) - 1
    while i >= 0:
        c = buf[i]
        if c == '[': return buf, True
        if c == ',': return buf[:i], False
        if c == ':':
            i -= 1
            while i >= 0:
                if buf[i] == '"':
                    i -= 1
                    while i >= 0:
                        if buf[i] == '"':
                            i -= 1
                            if i >= 0 and buf[i] == '\\':
                                i -= 1; continue
                            while i >= 0:
                                if buf[i] == '{': return buf[:i+1], True
                                if buf[i] == ',': return buf[:i], False
                                i -= 1
                        i -= 1
                    break
                i -= 1
            break
        i -= 1
    return buf, False

def sj_delete(buf, key):
    for k, ks, vs, ve in members(buf):
        if k == key:
            out, nextc = delete_tail(buf[:vs])
            ex = 0
            if nextc:
                i, j = ve, 0
                while i < len(buf):
                    if buf[i] <= ' ':
                        i += 1; j += 1; continue
                    if buf[i] == ',': ex = j + 1
                    break
            return out + buf[ve+ex:]
    return buf

def sj_append(buf, key, raw):
    comma = False
    for c in buf[1:]:
        if c <= ' ': continue
        if c in '}]': break
        comma = True; break
    end = len(buf) - 1
    while buf[end] != '}': end -= 1
    return buf[:end] + (',' if comma else '') + json.dumps(key) + ':' + raw + '}'

def sj_replace(buf, key, raw):
    for k, ks, vs, ve in members(buf):
        if k == key: return buf[:vs] + raw + buf[ve:]
    return sj_append(buf, key, raw)


import sys
WS = ['', '', ' ', '  ', '\n', '\t ']
VALS = ['1', '"x"', '{ "n" : 1 }', '[1, 2]', 'true', '1.50', '"\\u00e9"']
random.seed(20261126)
cases = []
while len(cases) < 400:
    keys = ['k%d' % i for i in range(random.randint(0, 5))]
    w = lambda: random.choice(WS)
    parts = [w() + json.dumps(k) + w() + ':' + w() + random.choice(VALS) + w() for k in keys]
    text = '{' + ','.join(parts) + ('' if parts else w()) + '}'
    ops = []
    present = list(keys)
    originals = set(keys)  # original members not deleted (a key added again is new)
    new = 0
    for _ in range(random.randint(1, 5)):
        r = random.random()
        if r < 0.35 and present:
            k = random.choice(present); present.remove(k); originals.discard(k)
            ops.append(['delete', k])
        elif r < 0.65 and present:
            ops.append(['set', random.choice(present), 9])
        else:
            k = random.choice(['n%d' % new, 'k0']) if 'k0' not in present else 'n%d' % new
            new += 1
            if k not in present: present.append(k)
            ops.append(['set', k, 7])
    # Every original member deleted (or none to begin with) and a key deleted: SJSON's
    # spacing inside the braces then depends on the order of the calls (not kept).
    if not originals and any(op[0] == 'delete' for op in ops):
        continue
    buf = text
    for op in ops:
        if op[0] == 'delete': buf = sj_delete(buf, op[1])
        else: buf = sj_replace(buf, op[1], str(op[2]))
    json.loads(buf)
    cases.append({'text': text, 'ops': ops, 'sjson': buf})
json.dump(cases, sys.stdout, indent=0)

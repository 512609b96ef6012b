#!/usr/bin/env python3
"""Writes splice_cases.json: JSON objects, changes to them, and the text Substation's SJSON
leaves, for engine/src/json/splice.rs's test; with `arrays`, splice_array_cases.json, the
same for arrays.

The functions model SJSON's top-level set and delete as sjson.go applies them (a value
replaced in place; a new key appended before the closing brace, after the white space
there, with a comma when the object is not empty; a key deleted with the comma before it,
or the first one with the white space before it and the comma after it; a key found by its
value, whether or not it is written with an escape, and a key given twice by its first
member), applied one after the other, as Substation's transforms call them. The Rust side
records what changed and rebuilds the text in one pass, taking the text as it stands
whenever the order of the calls would matter (the first member removed with added keys
after it and no other original left). Deleting a key given twice is left out: SJSON
uncovers its later value, sluice deletes the key (docs/reference).

Arrays (`arrays`): an element set in place; an index at or past the end makes SJSON write
the array anew, each element's text joined by bare commas, padded with nulls; `-1` appends
before the closing bracket (after the white space there); a deleted element goes with the
comma before it, or the first one with the comma after it (the white space before it
stays).

    python3 engine/src/json/testdata/splice_model.py > engine/src/json/testdata/splice_cases.json
    python3 engine/src/json/testdata/splice_model.py arrays > engine/src/json/testdata/splice_array_cases.json
"""
import random, itertools, json

def skip_value(buf, i):
    # the end of the value starting at buf[i]
    n = len(buf)
    def skip_str(i):
        i += 1
        while buf[i] != '"':
            i += 2 if buf[i] == '\\' else 1
        return i + 1
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

def members(buf):
    # (key, key_start, value_start, value_end) of a top-level object's members
    out = []; i = 1; n = len(buf)
    def ws(i):
        while i < n and buf[i] in ' \t\r\n': i += 1
        return i
    i = ws(1)
    while buf[i] != '}':
        ks = i; ke = skip_value(buf, i); key = json.loads(buf[ks:ke])  # GJSON matches the key's value
        i = ws(ke); assert buf[i] == ':'; i = ws(i + 1)
        vs = i; ve = skip_value(buf, i)
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

def cut(buf, start, end):
    # appendRawPaths deleting the value at buf[start:end] (an object's value or an element)
    out, nextc = delete_tail(buf[:start])
    ex = 0
    if nextc:
        i, j = end, 0
        while i < len(buf):
            if buf[i] <= ' ':
                i += 1; j += 1; continue
            if buf[i] == ',': ex = j + 1
            break
    return out + buf[end+ex:]

def sj_delete(buf, key):
    for k, ks, vs, ve in members(buf):
        if k == key: return cut(buf, vs, ve)
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


def elements(buf):
    # (start, end) of a top-level array's elements, as gjson's Index and Raw give them
    out = []; n = len(buf)
    def ws(i):
        while i < n and buf[i] in ' \t\r\n': i += 1
        return i
    i = ws(1)
    while buf[i] != ']':
        e = skip_value(buf, i)
        out.append((i, e))
        i = ws(e)
        if buf[i] == ',': i = ws(i + 1)
    return out

def sja_set(buf, idx, raw):
    els = elements(buf)
    if idx < len(els):
        s, e = els[idx]
        return buf[:s] + raw + buf[e:]
    # appendRawPaths, a numeric key past the end: written anew
    out = '[' + ','.join(buf[s:e] for s, e in els)
    if not els:
        out += 'null,' * idx
    else:
        out += ',null' * (idx - len(els)) + ','
    return out + raw + ']'

def sja_append(buf, raw):
    comma = False
    for c in buf[1:]:
        if c <= ' ': continue
        if c in '}]': break
        comma = True; break
    body = buf.strip(' \t\r\n')
    if body.endswith(']'): body = body[:-1]
    return body + (',' if comma else '') + raw + ']'

def sja_delete(buf, idx):
    els = elements(buf)
    if idx == -1: idx = len(els) - 1
    if not 0 <= idx < len(els): return buf
    return cut(buf, *els[idx])

def array_cases():
    w = lambda: random.choice(WS)
    cases = []
    while len(cases) < 400:
        n = random.randint(0, 5)
        parts = [w() + random.choice(VALS) + w() for _ in range(n)]
        text = '[' + ','.join(parts) + ('' if parts else w()) + ']'
        ops = []
        length = n
        for _ in range(random.randint(1, 5)):
            r = random.random()
            if r < 0.3 and length:
                i = random.choice([random.randrange(length), -1])
                ops.append(['delete', i])
                length -= 1
            elif r < 0.55 and length:
                ops.append(['set', random.randrange(length), 9])
            elif r < 0.8:
                ops.append(['append', 7])
                length += 1
            else:
                i = length + random.randint(0, 2)
                ops.append(['set', i, 8])
                length = i + 1
        buf = text
        for op in ops:
            if op[0] == 'delete': buf = sja_delete(buf, op[1])
            elif op[0] == 'append': buf = sja_append(buf, str(op[1]))
            else: buf = sja_set(buf, op[1], str(op[2]))
        json.loads(buf)
        cases.append({'text': text, 'ops': ops, 'sjson': buf})
    return cases


import sys
WS = ['', '', ' ', '  ', '\n', '\t ']
VALS = ['1', '"x"', '{ "n" : 1 }', '[1, 2]', 'true', '1.50', '"\\u00e9"']
random.seed(20261126)
if sys.argv[1:] == ['arrays']:
    json.dump(array_cases(), sys.stdout, indent=0)
    sys.exit()
cases = []
while len(cases) < 400:
    keys = ['k%d' % i for i in range(random.randint(0, 5))]
    w = lambda: random.choice(WS)
    # A key now and then written with an escape (`"k\u0031"` is `k1`).
    key_text = lambda k: json.dumps(k) if random.random() < 0.8 else '"%s\\u%04x"' % (k[:-1], ord(k[-1]))
    # A key now and then given twice: GJSON reads (and SJSON sets) its first member; the
    # later one stays in the text.
    twice = [random.choice(keys)] if keys and random.random() < 0.2 else []
    parts = [w() + key_text(k) + w() + ':' + w() + random.choice(VALS) + w() for k in keys + twice]
    text = '{' + ','.join(parts) + ('' if parts else w()) + '}'
    ops = []
    present = list(keys)
    new = 0
    for _ in range(random.randint(1, 5)):
        r = random.random()
        if r < 0.35 and present:
            k = random.choice(present); present.remove(k)
            ops.append(['delete', k])
        elif r < 0.65 and present:
            ops.append(['set', random.choice(present), 9])
        else:
            k = random.choice(['n%d' % new, 'k0']) if 'k0' not in present else 'n%d' % new
            new += 1
            if k not in present: present.append(k)
            ops.append(['set', k, 7])
    # SJSON deletes a key given twice one member at a time, uncovering the later value;
    # sluice deletes the key (docs/reference, the differences table).
    if any(op[0] == 'delete' and op[1] in twice for op in ops):
        continue
    buf = text
    for op in ops:
        if op[0] == 'delete': buf = sj_delete(buf, op[1])
        else: buf = sj_replace(buf, op[1], str(op[2]))
    json.loads(buf)
    cases.append({'text': text, 'ops': ops, 'sjson': buf})
json.dump(cases, sys.stdout, indent=0)

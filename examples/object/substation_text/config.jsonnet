// Substation's text where JSON meets other text. `object_to_string` of an object writes its
// text, spacing and all, as a string (Substation 2.8 keeps it a string); a key copied onto
// itself parses the JSON its string holds. A line of JSON followed by other bytes is read
// as GJSON reads it, in its first object, and written as SJSON edits it: a key the object
// has is set in place and the bytes after it stay; a key added goes before the last `}`, so
// with none after the object the bytes after it go. A line cut short of its closing brace
// is read alike and, set in place, stays without it (Substation's own test of a key copied
// onto itself); a key added to it is an error (SJSON would write the key in place of the
// line). To `format_json` neither is JSON.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'an-object-as-its-text-in-a-string',
      transforms: [
        sub.tf.test.message({ value: '{"event":{ "user" : "alice" },"detail":"{\\"ok\\":true}"}' }),
      ],
      condition: sub.cnd.str.eq({ value: '{"event":{ "user" : "alice" },"detail":{"ok":true},"event_text":"{ \\"user\\" : \\"alice\\" }"}' }),
    },
    {
      name: 'bytes-after-the-json-kept-when-a-key-is-set-in-place',
      transforms: [
        sub.tf.test.message({ value: '{"detail":"{\\"ok\\":true}"} trailer' }),
      ],
      condition: sub.cnd.str.eq({ value: '{"detail":{"ok":true}} trailer' }),
    },
    {
      name: 'bytes-after-the-json-dropped-when-a-key-is-added',
      transforms: [
        sub.tf.test.message({ value: '{"event":{"user":"bob"}} trailer' }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'event_text' }, value: '{"user":"bob"}' }),
        sub.cnd.str.eq({ value: '{"event":{"user":"bob"},"event_text":"{\\"user\\":\\"bob\\"}"}' }),
      ]),
    },
    {
      name: 'a-line-cut-short-of-its-brace',
      transforms: [
        sub.tf.test.message({ value: '{"detail":"{\\"b\\":\\"c\\"}"' }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'detail.b' }, value: 'c' }),
        sub.cnd.str.eq({ value: '{"detail":{"b":"c"}' }),
      ]),
    },
    {
      name: 'not-json-to-format-json',
      transforms: [
        sub.tf.test.message({ value: '{"detail":"x"} trailer' }),
      ],
      condition: sub.cnd.none([sub.cnd.fmt.json()]),
    },
  ],
  transforms: [
    sub.tf.obj.cp({ obj: { src: 'detail', trg: 'detail' } }),
    sub.tf.obj.to.str({ obj: { src: 'event', trg: 'event_text' } }),
    sub.tf.send.stdout(),
  ],
}

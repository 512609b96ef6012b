// Reassembles pretty-printed JSON that arrives one line per message (e.g. `sluice run`
// over a file written by `jq .`) into one compact message per object. Braces inside
// strings do not count, and a line may close one object and open the next.
//
//   sluice run -c examples/format/pretty_print/config.jsonnet examples/format/pretty_print/input.txt
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'reassembles-objects',
      // One message per line, as `sluice run` reads a file.
      transforms: [
        sub.tf.test.message({ value: '{' }),
        sub.tf.test.message({ value: '  "user": "ada",' }),
        sub.tf.test.message({ value: '  "note": "a } in a string",' }),
        sub.tf.test.message({ value: '  "tags": [' }),
        sub.tf.test.message({ value: '    "x"' }),
        sub.tf.test.message({ value: '  ]' }),
        sub.tf.test.message({ value: '} {' }),
        sub.tf.test.message({ value: '  "user": "bob", "note": "{", "tags": []' }),
        sub.tf.test.message({ value: '}' }),
      ],
      condition: sub.cnd.all([
        sub.cnd.any([
          sub.cnd.str.eq({ obj: { src: 'user' }, value: 'ada' }),
          sub.cnd.str.eq({ obj: { src: 'user' }, value: 'bob' }),
        ]),
        sub.cnd.num.len.gt({ obj: { src: 'note' }, value: 0 }),
      ]),
      outputs: 2,
    },
  ],
  transforms: [
    sub.tf.fmt.from.pretty_print(),
    sub.tf.send.stdout(),
  ],
}

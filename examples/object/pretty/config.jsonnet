// Pretty-printed output, as Substation's examples print it: copying `@pretty` into the data
// lays an object out as GJSON does (short arrays of values on one line).
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'pretty',
      transforms: [sub.tf.test.message({ value: { a: [1, 2, 3], b: { c: 'd' } } })],
      condition: sub.cnd.str.eq({ value: '{\n  "a": [1, 2, 3],\n  "b": {\n    "c": "d"\n  }\n}\n' }),
    },
  ],
  transforms: [
    sub.tf.obj.cp({ obj: { src: '@pretty' } }),
    sub.tf.send.stdout(),
  ],
}

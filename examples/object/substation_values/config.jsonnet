// How values are written, as Substation writes them (its SetValue): a string that holds a
// JSON object or array becomes that object or array; the whole data can be parked in a
// metadata key and brought back; a string in the way of a nested key is replaced.
local sub = std.extVar('sub');

{
  tests: [
    {
      // A field that carries JSON as text is turned into the JSON value by copying it
      // onto itself; a string holding a number stays a string.
      name: 'json-text-becomes-json',
      transforms: [
        sub.tf.test.message({ value: { detail: '{"user":"alice","ok":true}', code: '42' } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'detail.user' }, value: 'alice' }),
        sub.cnd.str.eq({ obj: { src: 'code' }, value: '42' }),
        sub.cnd.str.eq({ obj: { src: 'tags.0' }, value: 'parsed' }),
        sub.cnd.str.eq({ obj: { src: 'original.detail.ok' }, value: 'true' }),
      ]),
    },
  ],
  transforms: [
    sub.tf.obj.cp({ obj: { src: 'detail', trg: 'detail' } }),
    // object_insert's value is typed the same way: this inserts an array.
    sub.tf.obj.insert({ obj: { trg: 'tags' }, value: '["parsed"]' }),
    // The whole data into a metadata key: the data becomes empty ...
    sub.tf.obj.cp({ obj: { trg: 'meta original' } }),
    // ... and back, as the data.
    sub.tf.obj.cp({ obj: { src: 'meta original' } }),
    // Nest a copy of it under `original`.
    sub.tf.obj.cp({ obj: { src: 'meta original', trg: 'original' } }),
    sub.tf.send.stdout(),
  ],
}

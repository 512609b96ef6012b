// Normalizes a record: converts string fields to their types, drops a debug field and
// tags the record with its source.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'converts-deletes-and-inserts',
      transforms: [
        sub.tf.test.message({ value: { user: { id: '42', admin: 'true', score: '7.5' }, debug: 'x' } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.num.eq({ obj: { src: 'user.id' }, value: 42 }),
        sub.cnd.str.eq({ obj: { src: 'user.admin' }, value: 'true' }),
        sub.cnd.num.eq({ obj: { src: 'user.score' }, value: 7.5 }),
        sub.cnd.str.eq({ obj: { src: 'user.label' }, value: '42' }),
        sub.cnd.str.eq({ obj: { src: 'source' }, value: 'app' }),
        // The debug field is gone: the whole record has no "debug" in it.
        sub.cnd.none([sub.cnd.str.has({ value: 'debug' })]),
      ]),
    },
  ],
  transforms: [
    sub.tf.obj.to.int({ obj: { src: 'user.id', trg: 'user.id' } }),
    sub.tf.obj.to.bool({ obj: { src: 'user.admin', trg: 'user.admin' } }),
    sub.tf.obj.to.float({ obj: { src: 'user.score', trg: 'user.score' } }),
    sub.tf.obj.to.str({ obj: { src: 'user.id', trg: 'user.label' } }),
    sub.tf.obj.del({ obj: { src: 'debug' } }),
    sub.tf.obj.insert({ obj: { trg: 'source' }, value: 'app' }),
    sub.tf.send.stdout(),
  ],
}

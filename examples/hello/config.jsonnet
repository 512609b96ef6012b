// The smallest useful pipeline: add a field, change one, print.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'greets-and-uppercases',
      transforms: [sub.tf.test.message({ value: { a: 'b' } })],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'a' }, value: 'B' }),
        sub.cnd.str.eq({ obj: { src: 'greeting' }, value: 'hello' }),
      ]),
    },
  ],
  transforms: [
    sub.tf.obj.insert({ obj: { trg: 'greeting' }, value: 'hello' }),
    sub.tf.str.to.upper({ obj: { src: 'a', trg: 'a' } }),
    sub.tf.send.stdout(),
  ],
}

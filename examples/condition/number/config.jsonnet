// Routes events by a number with meta_switch: events whose `n` is greater than 3 are
// labelled 'big', the others 'small' (a case without a condition is the default).
// `number_greater_than` with `obj.src` reads the value at that key; a missing key is false.
local sub = std.extVar('sub');

local is_big = sub.cnd.num.gt({ obj: { src: 'n' }, value: 3 });

{
  tests: [
    {
      name: 'routes-by-size',
      transforms: [
        sub.tf.test.message({ value: { n: 5 } }),
        sub.tf.test.message({ value: { n: 1 } }),
        sub.tf.test.message({ value: { n: 3 } }),
      ],
      // Every output is labelled, and labelled the way its number says.
      condition: sub.cnd.any([
        sub.cnd.all([is_big, sub.cnd.str.eq({ obj: { src: 'size' }, value: 'big' })]),
        sub.cnd.all([
          sub.cnd.none([is_big]),
          sub.cnd.str.eq({ obj: { src: 'size' }, value: 'small' }),
        ]),
      ]),
    },
  ],
  transforms: [
    sub.tf.meta.switch({ cases: [
      {
        condition: is_big,
        transforms: [sub.tf.obj.insert({ obj: { trg: 'size' }, value: 'big' })],
      },
      {
        transforms: [sub.tf.obj.insert({ obj: { trg: 'size' }, value: 'small' })],
      },
    ] }),
    sub.tf.send.stdout(),
  ],
}

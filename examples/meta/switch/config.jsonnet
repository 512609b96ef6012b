// Routes each event by its type: the first case whose condition matches runs, a case
// without a condition catches the rest. At the end of the input the ctrl message goes
// through every case, so each route's send flushes.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'login events are tagged',
      transforms: [
        sub.tf.test.message({ value: { type: 'login', user: 'alice' } }),
      ],
      condition: sub.cnd.str.eq({ obj: { src: 'route' }, value: 'auth' }),
    },
    {
      name: 'other events take the default route',
      transforms: [
        sub.tf.test.message({ value: { type: 'click', user: 'bob' } }),
      ],
      condition: sub.cnd.str.eq({ obj: { src: 'route' }, value: 'default' }),
    },
  ],
  transforms: [
    sub.tf.meta.switch({ cases: [
      {
        condition: sub.cnd.str.eq({ obj: { src: 'type' }, value: 'login' }),
        transforms: [
          sub.tf.obj.insert({ obj: { trg: 'route' }, value: 'auth' }),
        ],
      },
      {
        transforms: [
          sub.tf.obj.insert({ obj: { trg: 'route' }, value: 'default' }),
        ],
      },
    ] }),
    sub.tf.send.stdout(),
  ],
}

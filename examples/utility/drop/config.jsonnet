// Drops the messages a route has no further use for: sends pass their input on, so a
// route ends with `utility_drop`. Here debug events are dropped, everything else kept.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'only non-debug events remain',
      transforms: [
        sub.tf.test.message({ value: { level: 'debug', msg: 'noise' } }),
        sub.tf.test.message({ value: { level: 'error', msg: 'disk full' } }),
      ],
      condition: sub.cnd.str.eq({ obj: { src: 'level' }, value: 'error' }),
    },
  ],
  transforms: [
    sub.tf.meta.switch({ cases: [
      {
        condition: sub.cnd.str.eq({ obj: { src: 'level' }, value: 'debug' }),
        transforms: [sub.tf.util.drop()],
      },
    ] }),
    sub.tf.send.stdout(),
  ],
}

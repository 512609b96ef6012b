// Waits before passing each message on, e.g. to pace calls to a rate-limited API.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'messages pass unchanged after the delay',
      transforms: [
        sub.tf.test.message({ value: { a: 'b' } }),
      ],
      condition: sub.cnd.str.eq({ obj: { src: 'a' }, value: 'b' }),
    },
  ],
  transforms: [
    sub.tf.util.delay({ duration: '10ms' }),
    sub.tf.send.stdout(),
  ],
}

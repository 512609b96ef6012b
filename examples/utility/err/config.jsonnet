// Fails on purpose: `utility_err` returns an error whose text is exactly `message`.
// Useful to reject data that must never pass, or to test error handling; here events
// without a user are rejected, and `meta_err` turns the rejection into a tag.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'events with a user pass untouched',
      transforms: [
        sub.tf.test.message({ value: { user: 'alice' } }),
      ],
      condition: sub.cnd.str.eq({ obj: { src: 'user' }, value: 'alice' }),
    },
  ],
  transforms: [
    sub.tf.meta.err({
      transforms: [
        sub.tf.meta.switch({ cases: [
          {
            condition: sub.cnd.none([sub.cnd.num.len.gt({ obj: { src: 'user' }, value: 0 })]),
            transforms: [sub.tf.util.err({ message: 'event has no user' })],
          },
        ] }),
      ],
      error_messages: ['no user'],
    }),
    sub.tf.send.stdout(),
  ],
}

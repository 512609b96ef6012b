// Prints events as NDJSON, 100 per batch: the auxiliary transforms join a batch into one
// newline-separated block, which send_stdout prints as one write. Data passes through the
// send unchanged, so the test checks the events themselves.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'events-pass-through-the-send',
      transforms: [
        sub.tf.test.message({ value: { user: 'alice', action: 'login' } }),
        sub.tf.test.message({ value: { user: 'bob', action: 'login' } }),
      ],
      condition: sub.cnd.str.eq({ obj: { src: 'action' }, value: 'login' }),
    },
  ],
  transforms: [
    sub.tf.send.stdout({
      batch: { count: 100 },
      aux_tforms: [sub.tf.aggregate.to.string({ separator: '\n' })],
    }),
  ],
}

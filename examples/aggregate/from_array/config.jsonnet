// Splits a CloudTrail-style envelope into one message per record, keeping the envelope's
// other fields on each.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'one-message-per-record',
      transforms: [
        sub.tf.test.message({ value: {
          account: '123',
          Records: [{ event: 'GetObject' }, { event: 'PutObject' }],
        } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'account' }, value: '123' }),
        sub.cnd.str.has({ obj: { src: 'event' }, value: 'Object' }),
      ]),
    },
  ],
  transforms: [
    sub.tf.aggregate.from.array({ obj: { src: 'Records' } }),
  ],
}

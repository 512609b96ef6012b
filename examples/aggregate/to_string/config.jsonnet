// Joins events into newline-separated blocks of up to 1000 events (NDJSON), e.g. to send
// a batch as one record.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'joins-with-newlines',
      transforms: [
        sub.tf.test.message({ value: 'a' }),
        sub.tf.test.message({ value: 'b' }),
        sub.tf.test.message({ value: 'c' }),
      ],
      condition: sub.cnd.str.eq({ value: 'a\nb\nc' }),
    },
  ],
  transforms: [
    sub.tf.aggregate.to.string({ separator: '\n', batch: { count: 1000 } }),
  ],
}

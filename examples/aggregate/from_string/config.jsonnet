// Splits newline-delimited data (e.g. an NDJSON object read from S3) into one message per
// line.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'one-message-per-line',
      transforms: [
        sub.tf.test.message({ value: '{"n":1}\n{"n":2}\n{"n":3}' }),
      ],
      condition: sub.cnd.num.gt({ obj: { src: 'n' }, value: 0 }),
    },
  ],
  transforms: [
    sub.tf.aggregate.from.string({ separator: '\n' }),
  ],
}

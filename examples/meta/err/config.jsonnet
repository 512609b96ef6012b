// Swallows the errors whose text matches `error_messages`; the message that failed comes
// out unchanged and goes on down the list.
//
// Careful: swallowing a send's error does not make the send succeed. Sources that take
// per-record reports (Kinesis, DynamoDB streams, SQS through Lambda) still redeliver the
// records that were not delivered; sources that only see a pass/fail for the whole batch
// (stdin, files) lose them. Wrap only what you can afford to lose.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'the error is swallowed and the message passes unchanged',
      transforms: [
        sub.tf.test.message({ value: { a: 'b' } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'a' }, value: 'b' }),
        sub.cnd.none([sub.cnd.num.len.gt({ obj: { src: 'c' }, value: 0 })]),
      ]),
    },
  ],
  transforms: [
    sub.tf.meta.err({
      transforms: [
        sub.tf.obj.cp({ obj: { src: 'a', trg: 'c' } }),
        sub.tf.util.err({ message: 'the lookup service is unavailable' }),
      ],
      error_messages: ['unavailable'],
    }),
    sub.tf.send.stdout(),
  ],
}

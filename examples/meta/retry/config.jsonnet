// Retries an inner list while its output does not satisfy a condition or while it fails
// with a matching error: at most `retry.count` retries, `retry.delay` apart. Here the
// condition holds at once, so no retry is needed. In sluice `count: 0` means no retry
// (Substation retries forever), and the final error keeps its cause.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'the output satisfies the condition',
      transforms: [
        sub.tf.test.message({ value: { a: 'b' } }),
      ],
      condition: sub.cnd.str.eq({ obj: { src: 'c' }, value: 'b' }),
    },
  ],
  transforms: [
    sub.tf.meta.retry({
      transforms: [
        sub.tf.obj.cp({ obj: { src: 'a', trg: 'c' } }),
      ],
      condition: sub.cnd.num.len.gt({ obj: { src: 'c' }, value: 0 }),
      retry: { count: 2, delay: '100ms' },
      error_messages: ['.*'],
    }),
    sub.tf.send.stdout(),
  ],
}

// Cuts a long stream into batches: every 2 messages a ctrl message is emitted before the
// next one, so the transforms after it flush. Here each batch of 2 becomes one array.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'batches of at most two',
      transforms: [
        sub.tf.test.message({ value: { n: 1 } }),
        sub.tf.test.message({ value: { n: 2 } }),
        sub.tf.test.message({ value: { n: 3 } }),
      ],
      condition: sub.cnd.num.len.lt({ value: 3, obj: { src: '@this' } }),
    },
  ],
  transforms: [
    sub.tf.util.control({ batch: { count: 2 } }),
    sub.tf.agg.to.array(),
    sub.tf.send.stdout(),
  ],
}

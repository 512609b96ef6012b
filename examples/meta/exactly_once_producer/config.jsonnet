// Exactly once for a producer: the send is inside the lock, so a record reaches the
// destination once even when the input is delivered again.
//
// The lock commits a key only after the send delivered its message (at the end of the
// input, or at each `utility_control` boundary). When the send fails, the keys of what was
// not delivered are released and the error stops the run, so running it again delivers
// them: nothing is lost. `duplicates: 'drop'` keeps duplicates out of the rest of the
// pipeline (Substation's lock lets them continue unchanged, the default here too).
//
// Substation's version of this example wraps the lock in `meta_err`. Do not: swallowing
// the error of a failed send turns it into a silent drop for sources that only see a
// pass/fail for the whole batch, such as stdin and files.
local sub = std.extVar('sub');

local kv = sub.kv_store.sqlite({ file: '.sluice/exactly_once_producer.sqlite' });

{
  tests: [
    {
      name: 'each order is sent once',
      transforms: [
        sub.tf.test.message({ value: { order: 1, total: 10 } }),
        sub.tf.test.message({ value: { order: 1, total: 10 } }),
        sub.tf.test.message({ value: { order: 2, total: 25 } }),
      ],
      outputs: 2,
      condition: sub.cnd.num.len.gt({ obj: { src: 'sent_at' }, value: 0 }),
    },
  ],
  transforms: [
    sub.tf.meta.kv_store.lock({
      kv_store: kv,
      prefix: 'eo_producer',
      ttl_offset: '24h',
      object: { source_key: 'order' },
      duplicates: 'drop',
      transforms: [
        sub.tf.time.now({ obj: { trg: 'sent_at' } }),
        sub.tf.send.stdout(),
      ],
    }),
  ],
}

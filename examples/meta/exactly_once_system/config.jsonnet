// Exactly once for a whole pipeline: every transform, the send included, is inside the
// lock, and the lock key is the hash of the whole message (no `source_key`).
// Locks last a week (`ttl_offset`): a copy that arrives later than that is processed again.
// To count the week from the event's own time instead of from its processing, add
// `object: { ttl_key: 'ts' }` (epoch seconds, ms, µs or ns); then an event older than a
// week is never deduplicated.
local sub = std.extVar('sub');

local kv = sub.kv_store.sqlite({ file: '.sluice/exactly_once_system.sqlite' });

{
  tests: [
    {
      name: 'identical events are processed once',
      transforms: [
        sub.tf.test.message({ value: { ts: 1700000000123, msg: 'login' } }),
        sub.tf.test.message({ value: { ts: 1700000000123, msg: 'login' } }),
        sub.tf.test.message({ value: { ts: 1700000000456, msg: 'login' } }),
      ],
      outputs: 2,
      condition: sub.cnd.str.eq({ obj: { src: 'processed' }, value: 'true' }),
    },
  ],
  transforms: [
    sub.tf.meta.kv_store.lock({
      kv_store: kv,
      prefix: 'eo_system',
      ttl_offset: '168h',
      duplicates: 'drop',
      transforms: [
        sub.tf.obj.insert({ obj: { trg: 'processed' }, value: true }),
        sub.tf.send.stdout(),
      ],
    }),
  ],
}

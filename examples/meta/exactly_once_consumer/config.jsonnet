// Exactly once for a consumer: the lock marks the messages it sees for the first time, and
// everything else is dropped before it reaches the rest of the pipeline.
//
// The locks live in an SQLite file next to where `sluice run` runs (`.sluice/`), so a second
// run over the same input (a re-sent file, a retried job) skips what the first one
// processed. Use `sub.kv_store.aws.dynamodb` when several machines share the work.
//
//   sluice run -c examples/meta/exactly_once_consumer/config.jsonnet < events.jsonl
local sub = std.extVar('sub');

local kv = sub.kv_store.sqlite({ file: '.sluice/exactly_once_consumer.sqlite' });

{
  tests: [
    {
      name: 'a redelivered event is processed once',
      transforms: [
        sub.tf.test.message({ value: { id: 'e1', user: 'ann' } }),
        sub.tf.test.message({ value: { id: 'e2', user: 'bob' } }),
        sub.tf.test.message({ value: { id: 'e1', user: 'ann' } }),
      ],
      // Two of the three come out, both marked.
      outputs: 2,
      condition: sub.cnd.str.eq({ obj: { src: 'meta eo_consumer' }, value: 'locked' }),
    },
  ],
  transforms: [
    sub.tf.meta.kv_store.lock({
      kv_store: kv,
      prefix: 'eo_consumer',
      ttl_offset: '24h',
      object: { source_key: 'id' },
      transforms: [
        sub.tf.obj.insert({ obj: { trg: 'meta eo_consumer' }, value: 'locked' }),
      ],
    }),
    // Messages the lock did not mark are duplicates.
    sub.tf.meta.switch({ cases: [{
      condition: sub.cnd.none([
        sub.cnd.str.eq({ obj: { src: 'meta eo_consumer' }, value: 'locked' }),
      ]),
      transforms: [sub.tf.util.drop()],
    }] }),
    sub.tf.send.stdout(),
  ],
}

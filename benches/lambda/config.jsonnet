// The Lambda benchmark's pipeline (benches/lambda/bench.py): a typical normalisation of
// 1 KB JSON events from Kinesis, ending in a drop (no network in the benchmark).
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'an event is normalised',
      transforms: [
        sub.tf.test.message({ value: { id: 'e1', user: 'Ann', ts: 1700000000, pad: 'x' } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'actor.name' }, value: 'ann' }),
        sub.cnd.str.eq({ obj: { src: 'event.original_id' }, value: 'e1' }),
      ]),
    },
  ],
  transforms: [
    sub.tf.obj.copy({ obj: { src: 'id', trg: 'event.original_id' } }),
    sub.tf.obj.copy({ obj: { src: 'user', trg: 'actor.name' } }),
    sub.tf.str.to.lower({ obj: { src: 'actor.name', trg: 'actor.name' } }),
    sub.tf.obj.copy({ obj: { src: 'meta partitionKey', trg: 'kinesis.partition_key' } }),
    sub.tf.obj.copy({ obj: { src: 'meta sequenceNumber', trg: 'kinesis.sequence_number' } }),
    sub.tf.hash.sha256({ obj: { src: 'pad', trg: 'pad_sha256' } }),
    sub.tf.obj.delete({ obj: { src: 'pad' } }),
    sub.tf.time.from.unix({ obj: { src: 'ts', trg: 'event.created' } }),
    sub.tf.obj.insert({ obj: { trg: 'event.kind' }, value: 'event' }),
    sub.tf.util.drop(),
  ],
}

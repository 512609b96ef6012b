// Exactly once across a hop, the second hop: the consumer locks on the id the producer
// stamped (`hop`: the source stream and sequence number, see examples/aws/hop_producer),
// so the copies the first hop made (a retried batch, an answer lost after the stream took
// the records) are dropped, and puts each record once on `sluice-example-hop-out`.
//
// As a Lambda function on `sluice-example-hop` (`SLUICE_LAMBDA_HANDLER=
// AWS_KINESIS_DATA_STREAM`, `SLUICE_REPORT_BATCH_ITEM_FAILURES=true`). The lock is in
// DynamoDB (`sluice-locks`); with no `lease` set, a key is protected for the invocation's
// lifetime. The send is inside the lock, and reads the output stream back before sending a
// record again after a crash or an ambiguous answer, so the output holds each source record
// once. A record without `hop` (not stamped by the producer) fails alone and is reported in
// `batchItemFailures`.
local sub = std.extVar('sub');

local region = 'us-east-1';
local account = '123456789012';

{
  tests: [
    {
      name: 'copies from the first hop are dropped',
      transforms: [
        sub.tf.test.message({ value: { user: 'ann', hop: { stream: 'source', seq: '101' } } }),
        sub.tf.test.message({ value: { user: 'bob', hop: { stream: 'source', seq: '102' } } }),
        // The same record again: the producer's Lambda retried its batch.
        sub.tf.test.message({ value: { user: 'ann', hop: { stream: 'source', seq: '101' } } }),
      ],
      outputs: 2,
      condition: sub.cnd.str.eq({ obj: { src: 'hop.stream' }, value: 'source' }),
    },
  ],
  transforms: [
    sub.tf.meta.kv_store.lock({
      kv_store: sub.kv_store.aws.dynamodb({
        aws: { arn: 'arn:aws:dynamodb:%s:%s:table/sluice-locks' % [region, account] },
        attributes: { partition_key: 'PK', ttl: 'ttl' },
      }),
      prefix: 'hop',
      ttl_offset: '168h',
      object: { source_key: 'hop' },
      duplicates: 'drop',
      transforms: [
        sub.tf.send.aws.kinesis_data_stream({
          aws: { arn: 'arn:aws:kinesis:%s:%s:stream/sluice-example-hop-out' % [region, account] },
          object: { partition_key: 'user' },
        }),
      ],
    }),
  ],
}

// Kinesis → Kinesis, each event once: the lock takes each event's `id` in DynamoDB before the
// event is enriched and put on the output stream, and commits the key only after the stream
// accepted the record (PutRecords answered for it). A redelivered batch (a Lambda retry, a
// replayed shard) finds the keys committed and drops those events, so the output stream
// carries each event once; a record the stream refused rolls its key back, and the retry
// sends it.
//
// As a Lambda function over the input stream (each record's data is one JSON event), or
// locally with `sluice run` over JSON lines. Resources: the DynamoDB table `sluice-locks`
// (partition key `PK`, string; TTL on `ttl`) and the stream `sluice-example-enriched`. The
// local emulators create them from tests/fixtures/{dynamodb_tables,moto_resources}.json:
//
//   scripts/emulators.sh start dynamodb 8000 &
//   scripts/emulators.sh start moto 5000 &
//   export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 \
//     AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 AWS_ENDPOINT_URL_KINESIS=http://127.0.0.1:5000
//   sluice run -c examples/aws/kinesis_to_kinesis/config.jsonnet < events.jsonl
//
// Its `tests:` need those endpoints and a lock table no earlier run has written to
// (scripts/test.sh starts fresh emulators for them).
local sub = std.extVar('sub');

local region = 'us-east-1';
local account = '123456789012';

{
  tests: [
    {
      name: 'a redelivered event is put on the stream once',
      transforms: [
        sub.tf.test.message({ value: { id: 'kk1', action: 'login', user: 'ann' } }),
        sub.tf.test.message({ value: { id: 'kk2', action: 'logout', user: 'bob' } }),
        sub.tf.test.message({ value: { id: 'kk1', action: 'login', user: 'ann' } }),
      ],
      // The two first-time events are sent and continue; the redelivery is dropped.
      outputs: 2,
      condition: sub.cnd.str.eq({ obj: { src: 'pipeline' }, value: 'kinesis_to_kinesis' }),
    },
  ],
  transforms: [
    sub.tf.meta.kv_store.lock({
      kv_store: sub.kv_store.aws.dynamodb({
        aws: { arn: 'arn:aws:dynamodb:%s:%s:table/sluice-locks' % [region, account] },
        attributes: { partition_key: 'PK', ttl: 'ttl' },
      }),
      prefix: 'kinesis_to_kinesis',
      ttl_offset: '168h',
      object: { source_key: 'id' },
      duplicates: 'drop',
      transforms: [
        sub.tf.obj.insert({ obj: { trg: 'pipeline' }, value: 'kinesis_to_kinesis' }),
        // A record per event, keyed by user so that each user's events stay in order.
        sub.tf.send.aws.kinesis_data_stream({
          aws: { arn: 'arn:aws:kinesis:%s:%s:stream/sluice-example-enriched' % [region, account] },
          object: { partition_key: 'user' },
        }),
      ],
    }),
    sub.tf.send.stdout(),
  ],
}

// Kinesis → Data Firehose, each event once: the lock takes each event's `id` in DynamoDB,
// the event goes to the delivery stream (PutRecordBatch), and the key is committed only for
// the records Firehose accepted. A redelivered batch finds the keys committed and drops those
// events, so the delivery stream (and the bucket it writes to) gets each event once; a
// record Firehose refused rolls its key back, and the retry sends it.
//
// Firehose concatenates records without a separator, so the send's auxiliary transforms end
// each record with a newline: the delivered objects are JSON lines.
//
// As a Lambda function over a Kinesis stream (each record's data is one JSON event), or
// locally with `sluice run` over JSON lines. Resources: the DynamoDB table `sluice-locks`
// (partition key `PK`, string; TTL on `ttl`), the direct-put delivery stream
// `sluice-example-archive` and its bucket `sluice-example-archive`. The local emulators
// create them from tests/fixtures/{dynamodb_tables,moto_resources}.json:
//
//   scripts/emulators.sh start dynamodb 8000 &
//   scripts/emulators.sh start moto 5000 &
//   export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 \
//     AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 AWS_ENDPOINT_URL_FIREHOSE=http://127.0.0.1:5000
//   sluice run -c examples/aws/kinesis_to_firehose/config.jsonnet < events.jsonl
//
// Its `tests:` need those endpoints and a lock table no earlier run has written to
// (scripts/test.sh starts fresh emulators for them).
local sub = std.extVar('sub');

local region = 'us-east-1';
local account = '123456789012';

{
  tests: [
    {
      name: 'a redelivered event is delivered once',
      transforms: [
        sub.tf.test.message({ value: { id: 'kf1', action: 'login', user: 'ann' } }),
        sub.tf.test.message({ value: { id: 'kf2', action: 'logout', user: 'bob' } }),
        sub.tf.test.message({ value: { id: 'kf1', action: 'login', user: 'ann' } }),
      ],
      outputs: 2,
      condition: sub.cnd.str.eq({ obj: { src: 'status' }, value: 'archived' }),
    },
  ],
  transforms: [
    sub.tf.meta.kv_store.lock({
      kv_store: sub.kv_store.aws.dynamodb({
        aws: { arn: 'arn:aws:dynamodb:%s:%s:table/sluice-locks' % [region, account] },
        attributes: { partition_key: 'PK', ttl: 'ttl' },
      }),
      prefix: 'kinesis_to_firehose',
      ttl_offset: '168h',
      object: { source_key: 'id' },
      duplicates: 'drop',
      transforms: [
        sub.tf.obj.insert({ obj: { trg: 'status' }, value: 'archived' }),
        sub.tf.send.aws.data_firehose({
          aws: { arn: 'arn:aws:firehose:%s:%s:deliverystream/sluice-example-archive' % [region, account] },
          aux_tforms: [sub.tf.str.append({ suffix: '\n' })],
        }),
      ],
    }),
    sub.tf.send.stdout(),
  ],
}

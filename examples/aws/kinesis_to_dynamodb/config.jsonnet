// Kinesis → DynamoDB, exactly once even when the process crashes: each event's item and the
// commit of its lock go in one DynamoDB transaction (`transactional: true`), so the table
// gets every event once, whatever is redelivered and wherever a crash falls
// (docs/exactly-once.md, "A DynamoDB sink in one transaction").
//
// As a Lambda function over a Kinesis stream (the records' data are the JSON events), or
// locally with `sluice run` over JSON lines. Tables (create them once, on-demand billing):
// `sluice-locks` with partition key `PK` (string) and TTL on `ttl`; `sluice-example-events`
// with partition key `event_id` (string). Both are in tests/fixtures/dynamodb_tables.json,
// which the local emulator loads:
//
//   scripts/emulators.sh install
//   .emulators/node_modules/@dynoxide/linux-x64/dynoxide --port 8000 \
//     --schema tests/fixtures/dynamodb_tables.json &
//   export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 \
//     AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000
//   sluice run -c examples/aws/kinesis_to_dynamodb/config.jsonnet < events.jsonl
//
// Its `tests:` need that endpoint and tables no earlier run has written to (scripts/test.sh
// starts a fresh emulator for them).
local sub = std.extVar('sub');

local account = 'arn:aws:dynamodb:us-east-1:123456789012:table/';

{
  tests: [
    {
      name: 'a redelivered event is written once and dropped',
      transforms: [
        sub.tf.test.message({ value: { id: 'k1', action: 'login', user: 'ann' } }),
        sub.tf.test.message({ value: { id: 'k2', action: 'logout', user: 'bob' } }),
        sub.tf.test.message({ value: { id: 'k1', action: 'login', user: 'ann' } }),
      ],
      // The two first-time events continue; the redelivery is dropped by the lock.
      outputs: 2,
      // Each output is the item as written: keyed by event_id, without id.
      condition: sub.cnd.all([
        sub.cnd.str.has({ obj: { src: 'event_id' }, value: 'k' }),
        sub.cnd.none([sub.cnd.str.has({ obj: { src: 'id' }, value: 'k' })]),
      ]),
    },
  ],
  transforms: [
    sub.tf.meta.kv_store.lock({
      kv_store: sub.kv_store.aws.dynamodb({
        aws: { arn: account + 'sluice-locks' },
        attributes: { partition_key: 'PK', ttl: 'ttl' },
      }),
      prefix: 'events',
      ttl_offset: '168h',
      object: { source_key: 'id' },
      duplicates: 'drop',
      transforms: [
        // The item: the event under its key, with a processing stamp.
        sub.tf.obj.copy({ obj: { src: 'id', trg: 'event_id' } }),
        sub.tf.obj.delete({ obj: { src: 'id' } }),
        sub.tf.send.aws.dynamodb.put({
          aws: { arn: account + 'sluice-example-events' },
          transactional: true,
        }),
      ],
    }),
    sub.tf.send.stdout(),
  ],
}

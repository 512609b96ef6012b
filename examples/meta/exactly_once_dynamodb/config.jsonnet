// Exactly once across processes and machines: the consumer pattern with the locks in a
// DynamoDB table, as a Lambda function or several `sluice run` hosts would share them.
//
// The table (create it once): partition key `PK` (string), TTL on `ttl`, on-demand billing;
// see docs/exactly-once.md. The region comes from the ARN, credentials from the usual AWS
// environment. To try it locally against the emulator the tests use:
//
//   scripts/emulators.sh install
//   .emulators/node_modules/@dynoxide/linux-x64/dynoxide --port 8000 \
//     --schema tests/fixtures/dynamodb_tables.json &
//   export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
//     AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000
//   sluice run -c examples/meta/exactly_once_dynamodb/config.jsonnet < events.jsonl
//
// Its `tests:` need that endpoint and a table no earlier run has written to (scripts/test.sh
// starts a fresh emulator for them): a second run would rightly see the keys as duplicates.
local sub = std.extVar('sub');

local kv = sub.kv_store.aws.dynamodb({
  aws: { arn: 'arn:aws:dynamodb:us-east-1:123456789012:table/sluice-locks' },
  attributes: { partition_key: 'PK', ttl: 'ttl' },
});

{
  tests: [
    {
      name: 'a redelivered event is processed once',
      transforms: [
        sub.tf.test.message({ value: { id: 'e1', user: 'ann' } }),
        sub.tf.test.message({ value: { id: 'e2', user: 'bob' } }),
        sub.tf.test.message({ value: { id: 'e1', user: 'ann' } }),
      ],
      outputs: 2,
      condition: sub.cnd.str.eq({ obj: { src: 'meta eo_consumer' }, value: 'locked' }),
    },
  ],
  transforms: [
    sub.tf.meta.kv_store.lock({
      kv_store: kv,
      prefix: 'eo_dynamodb',
      ttl_offset: '24h',
      object: { source_key: 'id' },
      transforms: [
        sub.tf.obj.insert({ obj: { trg: 'meta eo_consumer' }, value: 'locked' }),
      ],
    }),
    sub.tf.meta.switch({ cases: [{
      condition: sub.cnd.none([
        sub.cnd.str.eq({ obj: { src: 'meta eo_consumer' }, value: 'locked' }),
      ]),
      transforms: [sub.tf.util.drop()],
    }] }),
    sub.tf.send.stdout(),
  ],
}

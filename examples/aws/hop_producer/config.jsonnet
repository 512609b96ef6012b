// Exactly once across a hop, the first hop: the producer stamps each record with where it
// came from and sends it on, at least once.
//
// As a Lambda function on a source Kinesis stream (`SLUICE_LAMBDA_HANDLER=
// AWS_KINESIS_DATA_STREAM`), each record's metadata says where it is: the stream and its
// sequence number (and, for a KPL aggregate, the user record's sub-sequence number). The
// producer copies them into the record as `hop`, the same on every attempt at that record,
// and puts the record on `sluice-example-hop`. It takes no lock: when Lambda retries a
// batch (an error, a timeout, a lost answer) the records are put again, and the hop stream
// may hold some twice. The consumer (examples/aws/hop_consumer) locks on `hop` and drops
// the copies, so the final sink holds each record once. The same works over a first sink
// that cannot be read back at all (Firehose, then a consumer of its bucket): the id travels
// with the record.
//
// Resources: the stream `sluice-example-hop`, which the local emulators create from
// tests/fixtures/moto_resources.json (see examples/aws/kinesis_to_kinesis for the commands).
// tests/examples_hop.rs runs both hops as Lambda functions through the runtime API.
local sub = std.extVar('sub');

local region = 'us-east-1';
local account = '123456789012';

{
  tests: [
    {
      name: 'each record carries where it came from',
      transforms: [
        sub.tf.test.message({ value: { user: 'ann', action: 'login' } }),
        // What the Kinesis handler sets for a record.
        sub.tf.obj.insert({ obj: { trg: 'meta stream' }, value: 'arn:aws:kinesis:%s:%s:stream/source' % [region, account] }),
        sub.tf.obj.insert({ obj: { trg: 'meta sequenceNumber' }, value: '49590338271490256608559692538361571095921575989136588898' }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'hop.seq' }, value: '49590338271490256608559692538361571095921575989136588898' }),
        sub.cnd.str.eq({ obj: { src: 'hop.stream' }, value: 'arn:aws:kinesis:%s:%s:stream/source' % [region, account] }),
      ]),
    },
  ],
  transforms: [
    sub.tf.obj.copy({ obj: { src: 'meta stream', trg: 'hop.stream' } }),
    sub.tf.obj.copy({ obj: { src: 'meta sequenceNumber', trg: 'hop.seq' } }),
    sub.tf.obj.copy({ obj: { src: 'meta subSequenceNumber', trg: 'hop.sub' } }),
    sub.tf.send.aws.kinesis_data_stream({
      aws: { arn: 'arn:aws:kinesis:%s:%s:stream/sluice-example-hop' % [region, account] },
      object: { partition_key: 'user' },
    }),
  ],
}

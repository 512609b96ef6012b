// Parses an RFC 3339 timestamp into epoch nanoseconds (the internal representation of
// time), then writes it back out in another layout and zone, and as epoch seconds.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'string-conversion',
      transforms: [
        sub.tf.test.message({ value: { ts: '2020-06-05T10:39:59.430166-04:00' } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.num.eq({ obj: { src: 'ts' }, value: 1591367999430166000 }),
        sub.cnd.str.eq({ obj: { src: 'utc' }, value: '2020-06-05T14:39:59.430Z' }),
        sub.cnd.str.eq({ obj: { src: 'local' }, value: 'Fri, 05 Jun 2020 23:39:59 JST' }),
        sub.cnd.num.eq({ obj: { src: 'unix' }, value: 1591367999 }),
      ]),
    },
  ],
  transforms: [
    // The offset in the input wins over `location`.
    sub.tf.time.from.string({ obj: { src: 'ts', trg: 'ts' }, format: '2006-01-02T15:04:05Z07:00' }),
    sub.tf.time.to.string({ obj: { src: 'ts', trg: 'utc' }, format: '2006-01-02T15:04:05.000Z07:00' }),
    sub.tf.time.to.string({ obj: { src: 'ts', trg: 'local' }, format: 'Mon, 02 Jan 2006 15:04:05 MST', location: 'Asia/Tokyo' }),
    sub.tf.time.unix({ obj: { src: 'ts', trg: 'unix' } }),
    sub.tf.send.stdout(),
  ],
}

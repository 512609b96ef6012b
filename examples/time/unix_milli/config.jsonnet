// Converts epoch milliseconds (common in JavaScript and AWS logs) to epoch nanoseconds,
// then formats them as a syslog-style stamp in a local zone.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'unix-milli',
      transforms: [
        sub.tf.test.message({ value: { event_time: 1591367999430 } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.num.eq({ obj: { src: 'ts' }, value: 1591367999430000000 }),
        sub.cnd.str.eq({ obj: { src: 'stamp' }, value: 'Jun  5 10:39:59.430' }),
        sub.cnd.num.eq({ obj: { src: 'ms' }, value: 1591367999430 }),
      ]),
    },
  ],
  transforms: [
    sub.tf.time.from.unix_milli({ obj: { src: 'event_time', trg: 'ts' } }),
    sub.tf.time.to.string({ obj: { src: 'ts', trg: 'stamp' }, format: 'Jan _2 15:04:05.000', location: 'America/New_York' }),
    sub.tf.time.unix_milli({ obj: { src: 'ts', trg: 'ms' } }),
    sub.tf.send.stdout(),
  ],
}

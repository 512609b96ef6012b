// Compresses the data with gzip (as a send to object storage would want it) and
// decompresses it again. Both work on the whole data only.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'gzip-round-trip',
      transforms: [
        sub.tf.test.message({ value: { a: 'b', n: [1, 2, 3] } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'a' }, value: 'b' }),
        sub.cnd.num.len.eq({ obj: { src: 'n' }, value: 3 }),
      ]),
    },
  ],
  transforms: [
    sub.tf.fmt.to.gzip(),
    // The data is now binary: 0x1f 0x8b ...
    sub.tf.fmt.from.gzip(),
    sub.tf.send.stdout(),
  ],
}

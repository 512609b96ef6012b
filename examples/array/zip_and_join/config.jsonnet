// Pairs up two parallel arrays (names and sizes) and joins a list of tags into one string.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'zips-and-joins',
      transforms: [
        sub.tf.test.message({ value: { columns: [['a.txt', 'b.txt'], [10, 20]], tags: ['prod', 'eu', 'web'] } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'files.0.0' }, value: 'a.txt' }),
        sub.cnd.num.eq({ obj: { src: 'files.0.1' }, value: 10 }),
        sub.cnd.str.eq({ obj: { src: 'files.1.0' }, value: 'b.txt' }),
        sub.cnd.num.eq({ obj: { src: 'files.1.1' }, value: 20 }),
        sub.cnd.str.eq({ obj: { src: 'tags' }, value: 'prod,eu,web' }),
      ]),
    },
  ],
  transforms: [
    sub.tf.arr.zip({ obj: { src: 'columns', trg: 'files' } }),
    sub.tf.obj.del({ obj: { src: 'columns' } }),
    sub.tf.arr.join({ obj: { src: 'tags', trg: 'tags' }, separator: ',' }),
    sub.tf.send.stdout(),
  ],
}

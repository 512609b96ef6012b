// Evaluates a condition on each element of an array: `meta_any` with `obj.src` is true when
// any address in `ips` is private, `meta_none` when none is. Events that talked to a private
// address are marked `internal: true`, the others `internal: false`.
local sub = std.extVar('sub');

local any_private = sub.cnd.meta.any({
  obj: { src: 'ips' },
  conditions: [sub.cnd.net.ip.private()],
});
local no_private = sub.cnd.meta.none({
  obj: { src: 'ips' },
  conditions: [sub.cnd.net.ip.private()],
});

{
  tests: [
    {
      name: 'marks-internal-traffic',
      transforms: [
        sub.tf.test.message({ value: { ips: ['8.8.8.8', '10.1.2.3'] } }),
        sub.tf.test.message({ value: { ips: ['8.8.8.8', '1.1.1.1'] } }),
        sub.tf.test.message({ value: { ips: ['192.168.0.7'] } }),
      ],
      condition: sub.cnd.any([
        sub.cnd.all([any_private, sub.cnd.str.eq({ obj: { src: 'internal' }, value: 'true' })]),
        sub.cnd.all([no_private, sub.cnd.str.eq({ obj: { src: 'internal' }, value: 'false' })]),
      ]),
    },
  ],
  transforms: [
    sub.tf.meta.switch({ cases: [
      {
        condition: any_private,
        transforms: [sub.tf.obj.insert({ obj: { trg: 'internal' }, value: true })],
      },
      {
        transforms: [sub.tf.obj.insert({ obj: { trg: 'internal' }, value: false })],
      },
    ] }),
    sub.tf.send.stdout(),
  ],
}

// Small arrays built and dropped per event: eight multipath sums (`[a,b]`, a new two-value
// array each) and four inserted one-value arrays. docs/notes/performance-zeek.md's array rows.
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.num.math.add({ obj: { src: '[orig_bytes,resp_bytes]', trg: 'b' + i } })
    for i in std.range(1, 8)
  ] + [
    sub.tf.obj.insert({ obj: { trg: 'c' + i }, value: ['network'] })
    for i in std.range(1, 4)
  ] + [sub.tf.send.stdout()],
}

// The Zeek conn event edited in place (no new document): a key inserted, one upper-cased,
// one deleted, one copied. docs/notes/performance-zeek.md's "edited in place" rows.
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.obj.insert({ obj: { trg: 'tags' }, value: ['zeek'] }),
    sub.tf.str.to.upper({ obj: { src: 'proto', trg: 'proto' } }),
    sub.tf.obj.del({ obj: { src: 'history' } }),
    sub.tf.obj.cp({ obj: { src: 'id\\.orig_h', trg: 'src' } }),
    sub.tf.send.stdout(),
  ],
}

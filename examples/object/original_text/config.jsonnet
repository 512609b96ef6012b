// JSON text as Substation keeps it: an object no transform has changed is read and written
// as the text it came in (white space, `1.50`), so its string form and its hash are those
// of the input; an object a transform changes is written compact from then on.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'unchanged-objects-keep-their-text',
      transforms: [
        sub.tf.test.message({ value: '{"user": {"user": "alice", "n": 1.50}, "host": {"name": "h1"}}' }),
      ],
      condition: sub.cnd.all([
        // The string form of `user` is its input text.
        sub.cnd.str.eq({ obj: { src: 'user_text' }, value: '{"user": "alice", "n": 1.50}' }),
        // So is what the hash saw: sha256 of that text.
        sub.cnd.str.eq({ obj: { src: 'user_sha256' }, value: 'f3be4e237ac4b6255f05298a35b292df083b029040eed325eb3ac8ce1b10994b' }),
        // `host` was changed, so it is compact now.
        sub.cnd.str.eq({ obj: { src: 'host_text' }, value: '{"name":"h1","seen":true}' }),
      ]),
    },
  ],
  transforms: [
    sub.tf.obj.to.str({ obj: { src: 'user', trg: 'user_text' } }),
    sub.tf.hash.sha256({ obj: { src: 'user', trg: 'user_sha256' } }),
    sub.tf.obj.insert({ obj: { trg: 'host.seen' }, value: true }),
    sub.tf.obj.to.str({ obj: { src: 'host', trg: 'host_text' } }),
    sub.tf.send.stdout(),
  ],
}

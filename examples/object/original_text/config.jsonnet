// JSON text as Substation keeps it. Substation edits the text in place (SJSON), so an
// object no transform has changed keeps its input text (white space, `1.50`), and its
// string form and its hash are those of that text; a change is spliced in, the rest of
// the object's text kept: a new key goes before the closing brace, a deleted one takes its
// comma with it.
local sub = std.extVar('sub');

local input = '{"user": {"user": "alice", "n": 1.50}, "host": {"name": "h1", "tmp": 0}}';

{
  tests: [
    {
      name: 'objects-keep-their-text',
      transforms: [
        sub.tf.test.message({ value: input }),
      ],
      condition: sub.cnd.all([
        // The string form of `user` is its input text.
        sub.cnd.str.eq({ obj: { src: 'user_text' }, value: '{"user": "alice", "n": 1.50}' }),
        // So is what the hash saw: sha256 of that text.
        sub.cnd.str.eq({ obj: { src: 'user_sha256' }, value: 'f3be4e237ac4b6255f05298a35b292df083b029040eed325eb3ac8ce1b10994b' }),
        // `host` changed: one key added, one deleted, the rest as it was.
        sub.cnd.str.eq({ obj: { src: 'host_text' }, value: '{"name": "h1","seen":true}' }),
      ]),
    },
    {
      // The whole message, byte for byte, as Substation writes it.
      name: 'the-message-as-substation-writes-it',
      transforms: [
        sub.tf.test.message({ value: input }),
      ],
      condition: sub.cnd.str.eq({ value: '{"user": {"user": "alice", "n": 1.50}, "host": {"name": "h1","seen":true},"user_text":{"user": "alice", "n": 1.50},"user_sha256":"f3be4e237ac4b6255f05298a35b292df083b029040eed325eb3ac8ce1b10994b","host_text":{"name": "h1","seen":true}}' }),
    },
  ],
  transforms: [
    sub.tf.obj.to.str({ obj: { src: 'user', trg: 'user_text' } }),
    sub.tf.hash.sha256({ obj: { src: 'user', trg: 'user_sha256' } }),
    sub.tf.obj.insert({ obj: { trg: 'host.seen' }, value: true }),
    sub.tf.obj.del({ obj: { src: 'host.tmp' } }),
    sub.tf.obj.to.str({ obj: { src: 'host', trg: 'host_text' } }),
    sub.tf.send.stdout(),
  ],
}

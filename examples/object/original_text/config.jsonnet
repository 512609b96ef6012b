// JSON text as Substation keeps it. Substation edits the text in place (SJSON), so an
// object or array no transform has changed keeps its input text (white space, `1.50`), and
// its string form (`object_to_string` writes an object's text as a string, as Substation 2.8
// does), its hash and its copies are those of that text; a change is spliced in,
// the rest of the text kept: a new key goes before the closing brace, a deleted one takes
// its comma with it. Arrays alike: `-1` appends before the closing bracket, and a deleted
// first element takes the comma after it; setting an index past the end writes the array
// anew, its elements' text joined by bare commas and padded with nulls.
local sub = std.extVar('sub');

local input = '{"user": {"user": "alice", "n": 1.50}, "host": {"name": "h1", "tmp": 0}, "ips": [ "10.0.0.1", "10.0.0.2" ], "ports": [80, 443 ]}';

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
      name: 'arrays-keep-their-text',
      transforms: [
        sub.tf.test.message({ value: input }),
      ],
      condition: sub.cnd.all([
        // Copied before the change: the input's text.
        sub.cnd.str.eq({ obj: { src: 'ports_copy' }, value: '[80, 443 ]' }),
        // `ports.-1`: appended after the space before the bracket.
        sub.cnd.str.eq({ obj: { src: 'ports' }, value: '[80, 443 ,8080]' }),
        // `ips.0` deleted, then `ips.3` set: written anew, padded with nulls.
        sub.cnd.str.eq({ obj: { src: 'ips' }, value: '["10.0.0.2",null,null,"10.0.0.9"]' }),
      ]),
    },
    {
      // The whole message, byte for byte, as Substation writes it.
      name: 'the-message-as-substation-writes-it',
      transforms: [
        sub.tf.test.message({ value: input }),
      ],
      condition: sub.cnd.str.eq({ value: '{"user": {"user": "alice", "n": 1.50}, "host": {"name": "h1","seen":true}, "ips": ["10.0.0.2",null,null,"10.0.0.9"], "ports": [80, 443 ,8080],"user_text":"{\\"user\\": \\"alice\\", \\"n\\": 1.50}","user_sha256":"f3be4e237ac4b6255f05298a35b292df083b029040eed325eb3ac8ce1b10994b","host_text":"{\\"name\\": \\"h1\\",\\"seen\\":true}","ports_copy":[80, 443 ]}' }),
    },
  ],
  transforms: [
    sub.tf.obj.to.str({ obj: { src: 'user', trg: 'user_text' } }),
    sub.tf.hash.sha256({ obj: { src: 'user', trg: 'user_sha256' } }),
    sub.tf.obj.insert({ obj: { trg: 'host.seen' }, value: true }),
    sub.tf.obj.del({ obj: { src: 'host.tmp' } }),
    sub.tf.obj.to.str({ obj: { src: 'host', trg: 'host_text' } }),
    sub.tf.obj.cp({ obj: { src: 'ports', trg: 'ports_copy' } }),
    sub.tf.obj.insert({ obj: { trg: 'ports.-1' }, value: 8080 }),
    sub.tf.obj.del({ obj: { src: 'ips.0' } }),
    sub.tf.obj.insert({ obj: { trg: 'ips.3' }, value: '10.0.0.9' }),
    sub.tf.send.stdout(),
  ],
}

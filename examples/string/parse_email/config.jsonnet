// Parses an e-mail address into its parts, cleans up a few strings and adds an event id.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'parses-and-cleans',
      transforms: [
        sub.tf.test.message({ value: { email: 'Ada.Lovelace@Example.COM', path: '/var/log/app', field: 'UserAgent' } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'parts.user' }, value: 'ada lovelace' }),
        sub.cnd.str.eq({ obj: { src: 'parts.domain' }, value: 'example.com' }),
        sub.cnd.str.eq({ obj: { src: 'fqdn' }, value: 'EXAMPLE.COM.' }),
        sub.cnd.str.eq({ obj: { src: 'segments.2' }, value: 'log' }),
        sub.cnd.str.eq({ obj: { src: 'field' }, value: 'user_agent' }),
        sub.cnd.num.len.eq({ obj: { src: 'event_id' }, value: 36 }),
      ]),
    },
  ],
  transforms: [
    sub.tf.str.to.lower({ obj: { src: 'email', trg: 'address' } }),
    sub.tf.str.capture({ obj: { src: 'address', trg: 'parts' }, pattern: '^(?P<user>[^@]+)@(?P<domain>.+)$' }),
    sub.tf.str.replace({ obj: { src: 'parts.user', trg: 'parts.user' }, pattern: @'\.', repl: ' ' }),
    sub.tf.str.to.upper({ obj: { src: 'parts.domain', trg: 'fqdn' } }),
    sub.tf.str.append({ obj: { src: 'fqdn', trg: 'fqdn' }, suffix: '.' }),
    sub.tf.str.split({ obj: { src: 'path', trg: 'segments' }, sep: '/' }),
    sub.tf.str.to.snake({ obj: { src: 'field', trg: 'field' } }),
    sub.tf.str.uuid({ obj: { trg: 'event_id' } }),
    sub.tf.send.stdout(),
  ],
}

// Splits a host name into its subdomain, registered domain and public suffix, by the
// public suffix list (so `github.io` is a suffix and `example.co.uk` a registered domain).
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'a two-label suffix',
      transforms: [sub.tf.test.message({ value: { host: 'www.mail.example.co.uk' } })],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'domain.sub' }, value: 'www.mail' }),
        sub.cnd.str.eq({ obj: { src: 'domain.registered' }, value: 'example.co.uk' }),
        sub.cnd.str.eq({ obj: { src: 'domain.tld' }, value: 'co.uk' }),
      ]),
    },
    {
      name: 'a private suffix',
      transforms: [sub.tf.test.message({ value: { host: 'docs.project.github.io' } })],
      condition: sub.cnd.str.eq({ obj: { src: 'domain.registered' }, value: 'project.github.io' }),
    },
  ],
  transforms: [
    sub.tf.net.domain.subdomain({ obj: { src: 'host', trg: 'domain.sub' } }),
    sub.tf.net.domain.registered_domain({ obj: { src: 'host', trg: 'domain.registered' } }),
    sub.tf.net.domain.tld({ obj: { src: 'host', trg: 'domain.tld' } }),
    sub.tf.send.stdout(),
  ],
}

// Adds hashes of a user name (SHA-256 to share, MD5 for a legacy system), then replaces the
// whole record with the SHA-256 of its text as a fingerprint in the metadata.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'hashes-user',
      transforms: [
        sub.tf.test.message({ value: { user: 'alice' } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'user_sha256' }, value: '2bd806c97f0e00af1a1fc3328fa763a9269723c8db8fac4f93af71db186d6e90' }),
        sub.cnd.str.eq({ obj: { src: 'user_md5' }, value: '6384e2b2184bcbf58eccf10ca7a6563c' }),
        sub.cnd.num.len.eq({ obj: { src: 'meta fingerprint' }, value: 64 }),
      ]),
    },
  ],
  transforms: [
    sub.tf.hash.sha256({ obj: { src: 'user', trg: 'user_sha256' } }),
    sub.tf.hash.md5({ obj: { src: 'user', trg: 'user_md5' } }),
    sub.tf.hash.sha256({ obj: { src: '@this', trg: 'meta fingerprint' } }),
    sub.tf.send.stdout(),
  ],
}

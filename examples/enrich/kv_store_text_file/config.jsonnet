// Flag events whose domain is on a list: `meta bad_domain` is true when the domain is a
// line of bad_domains.txt, and flagged events are dropped.
//
//   sluice run -c examples/enrich/kv_store_text_file/config.jsonnet <<< '{"domain":"evil.example"}'
local sub = std.extVar('sub');

local list = sub.kv_store.text_file({ file: 'examples/enrich/kv_store_text_file/bad_domains.txt' });

{
  tests: [
    {
      name: 'listed domains are dropped, others pass',
      transforms: [
        sub.tf.test.message({ value: { domain: 'evil.example' } }),
        sub.tf.test.message({ value: { domain: 'fine.example' } }),
        sub.tf.test.message({ value: { domain: 'worse.example' } }),
      ],
      outputs: 1,
      condition: sub.cnd.str.eq({ obj: { src: 'domain' }, value: 'fine.example' }),
    },
  ],
  transforms: [
    sub.tf.enrich.kv_store.iget({ kv_store: list, obj: { src: 'domain', trg: 'meta bad_domain' } }),
    sub.tf.meta.switch({ cases: [{
      condition: sub.cnd.str.eq({ obj: { src: 'meta bad_domain' }, value: 'true' }),
      transforms: [sub.tf.util.drop()],
    }] }),
    sub.tf.send.stdout(),
  ],
}

// Remember every IP address a user was seen from: each event adds its `ip` to the user's
// set in a memory store (kept for a day), then reads the set back into `seen_ips`.
// Both transforms name the same store, so they share it.
//
//   printf '{"user":"ann","ip":"10.0.0.1"}\n{"user":"ann","ip":"10.0.0.2"}\n' |
//     sluice run -c examples/enrich/kv_store_set_add/config.jsonnet
local sub = std.extVar('sub');

local kv = sub.kv_store.memory();

{
  tests: [
    {
      name: 'the set grows with each new address',
      transforms: [
        sub.tf.test.message({ value: { user: 'ann', ip: '10.0.0.1' } }),
        sub.tf.test.message({ value: { user: 'ann', ip: '10.0.0.1' } }),
        sub.tf.test.message({ value: { user: 'ann', ip: '10.0.0.2' } }),
        sub.tf.test.message({ value: { user: 'bob', ip: '10.9.9.9' } }),
      ],
      outputs: 4,
      // Every message carries a non-empty set.
      condition: sub.cnd.num.gt({ obj: { src: 'seen_ips.#' }, value: 0 }),
    },
    {
      name: 'a repeated address is kept once',
      transforms: [
        sub.tf.test.message({ value: { user: 'cid', ip: '10.0.0.7' } }),
        sub.tf.test.message({ value: { user: 'cid', ip: '10.0.0.7' } }),
      ],
      outputs: 2,
      condition: sub.cnd.num.eq({ obj: { src: 'seen_ips.#' }, value: 1 }),
    },
  ],
  transforms: [
    sub.tf.enrich.kv_store.sadd({ kv_store: kv, ttl_offset: '24h', obj: { src: 'user', trg: 'ip' } }),
    sub.tf.enrich.kv_store.iget({ kv_store: kv, obj: { src: 'user', trg: 'seen_ips' } }),
    sub.tf.send.stdout(),
  ],
}

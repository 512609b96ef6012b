// Exactly once on a key inside the record: the lock takes `order.id`, so every way one
// order may come again is one key: the same line twice, the line with bytes after its JSON
// (a trailer, a brace too many), cut short of its last brace, its inner object spaced
// otherwise or with its keys in another order. A lock on the whole `order` object would
// key its text, as Substation's does (GJSON's raw text): spacing and key order would then
// make other keys. Lock on a value inside it, or on `order|@pretty:{"sortKeys":true}`.
local sub = std.extVar('sub');

local order = '{"order":{"id":"o1","items":[1,2]},"v":1}';
local variants = [
  order,
  order,
  order + ' x',
  order + '}',
  std.substr(order, 0, std.length(order) - 1),
  '{"order":{ "id": "o1", "items": [1, 2] },"v":1}',
  '{"order":{"items":[1,2],"id":"o1"},"v":1}',
];

{
  tests: [
    {
      name: 'every-way-one-order-comes-again-is-one-key',
      transforms: [sub.tf.test.message({ value: v }) for v in variants],
      outputs: 1,
      condition: sub.cnd.str.eq({ obj: { src: 'order.id' }, value: 'o1' }),
    },
    {
      name: 'two-orders-are-two-keys',
      transforms: [
        sub.tf.test.message({ value: '{"order":{"id":"o1"}}' }),
        sub.tf.test.message({ value: '{"order":{"id":"o2"}}' }),
        sub.tf.test.message({ value: '{"order":{"id":"o1"}} x' }),
      ],
      outputs: 2,
      condition: sub.cnd.str.has({ obj: { src: 'order.id' }, value: 'o' }),
    },
  ],
  transforms: [
    sub.tf.meta.kv_store.lock({
      kv_store: sub.kv_store.memory(),
      prefix: 'eo_nested',
      ttl_offset: '24h',
      object: { source_key: 'order.id' },
      duplicates: 'drop',
      transforms: [sub.tf.send.stdout()],
    }),
  ],
}

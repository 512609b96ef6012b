// Totals an order: sums the item prices, applies a minimum charge and a cap, and computes
// the average price (total / number of items).
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'small-order-gets-minimum-charge',
      transforms: [
        sub.tf.test.message({ value: { prices: [2.5, 4, 1.5] } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.num.eq({ obj: { src: 'subtotal' }, value: 8 }),
        sub.cnd.num.eq({ obj: { src: 'charged' }, value: 10 }),
        sub.cnd.num.eq({ obj: { src: 'average' }, value: 2.6666666666666665 }),
      ]),
    },
    {
      name: 'large-order-is-capped',
      transforms: [
        sub.tf.test.message({ value: { prices: [600, 700] } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.num.eq({ obj: { src: 'subtotal' }, value: 1300 }),
        sub.cnd.num.eq({ obj: { src: 'charged' }, value: 1000 }),
        sub.cnd.num.eq({ obj: { src: 'average' }, value: 650 }),
      ]),
    },
  ],
  transforms: [
    sub.tf.num.math.add({ obj: { src: 'prices', trg: 'subtotal' } }),
    sub.tf.num.max({ obj: { src: 'subtotal', trg: 'charged' }, value: 10 }),
    sub.tf.num.min({ obj: { src: 'charged', trg: 'charged' }, value: 1000 }),
    // [subtotal, number of prices] -> subtotal / count
    sub.tf.obj.cp({ obj: { src: 'subtotal', trg: 'avg_terms.-1' } }),
    sub.tf.obj.cp({ obj: { src: 'prices.#', trg: 'avg_terms.-1' } }),
    sub.tf.num.math.div({ obj: { src: 'avg_terms', trg: 'average' } }),
    sub.tf.obj.del({ obj: { src: 'avg_terms' } }),
    sub.tf.send.stdout(),
  ],
}

// Runs every element of an array through a transform list and collects the results
// into a new array: here, upper-cases a list of domain names.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'every element is upper-cased',
      transforms: [
        sub.tf.test.message({ value: { domains: ['example.com', 'brex.com'] } }),
      ],
      condition: sub.cnd.str.eq({ obj: { src: 'upper_domains.1' }, value: 'BREX.COM' }),
    },
  ],
  transforms: [
    sub.tf.meta.for_each({
      obj: { src: 'domains', trg: 'upper_domains' },
      transforms: [
        sub.tf.str.to.upper(),
      ],
    }),
    sub.tf.send.stdout(),
  ],
}

// Groups events by user into {"events": [...]} objects, at most 10 per group; every group
// is emitted when the input ends (the ctrl message).
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'groups-by-user',
      transforms: [
        sub.tf.test.message({ value: { user: 'alice', n: 1 } }),
        sub.tf.test.message({ value: { user: 'bob', n: 2 } }),
        sub.tf.test.message({ value: { user: 'alice', n: 3 } }),
      ],
      // Every output holds one user's events only.
      condition: sub.cnd.any([
        sub.cnd.all([
          sub.cnd.str.eq({ obj: { src: 'events.0.user' }, value: 'alice' }),
          sub.cnd.str.eq({ obj: { src: 'events.1.user' }, value: 'alice' }),
          sub.cnd.str.eq({ obj: { src: 'events.#' }, value: '2' }),
        ]),
        sub.cnd.all([
          sub.cnd.str.eq({ obj: { src: 'events.0.user' }, value: 'bob' }),
          sub.cnd.str.eq({ obj: { src: 'events.#' }, value: '1' }),
        ]),
      ]),
    },
  ],
  transforms: [
    sub.tf.aggregate.to.array({
      obj: { trg: 'events', batch_key: 'user' },
      batch: { count: 10 },
    }),
  ],
}

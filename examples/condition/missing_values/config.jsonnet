// A missing value is Substation's empty value: the empty string, the number 0, length 0.
// Only the equal_to conditions are false for it (a missing value equals nothing).
local sub = std.extVar('sub');

local empty_list = sub.cnd.num.len.eq({ obj: { src: 'items' }, value: 0 });

{
  tests: [
    {
      name: 'missing-items-count-as-empty',
      transforms: [sub.tf.test.message({ value: { user: 'alice' } })],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'status' }, value: 'no items' }),
        // '' is in every string, the missing one too.
        sub.cnd.str.has({ obj: { src: 'nickname' }, value: '' }),
        // A missing number is 0.
        sub.cnd.num.lt({ obj: { src: 'score' }, value: 1 }),
        // But it equals nothing, not even ''.
        sub.cnd.none([sub.cnd.str.eq({ obj: { src: 'nickname' }, value: '' })]),
      ]),
    },
    {
      name: 'present-items',
      transforms: [sub.tf.test.message({ value: { user: 'bob', items: [1, 2] } })],
      condition: sub.cnd.str.eq({ obj: { src: 'status' }, value: 'has items' }),
    },
  ],
  transforms: [
    sub.tf.meta.switch({ cases: [
      { condition: empty_list, transforms: [sub.tf.obj.insert({ obj: { trg: 'status' }, value: 'no items' })] },
      { transforms: [sub.tf.obj.insert({ obj: { trg: 'status' }, value: 'has items' })] },
    ] }),
    sub.tf.send.stdout(),
  ],
}

// Enrich events with a row of a CSV file: the `user` object comes from users.csv, looked
// up by the event's `user_id` (the file's `id` column); an unknown id gives null.
//
// The file is read on the first lookup, relative to the working directory (run from the
// repository root); it may also be an https:// or s3:// URL.
//
//   sluice run -c examples/enrich/kv_store_csv_file/config.jsonnet <<< '{"user_id":"u1"}'
local sub = std.extVar('sub');

local users = sub.kv_store.csv_file({
  file: 'examples/enrich/kv_store_csv_file/users.csv',
  column: 'id',
});

{
  tests: [
    {
      name: 'a known user gets the row',
      transforms: [sub.tf.test.message({ value: { user_id: 'u2' } })],
      outputs: 1,
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'user.name' }, value: 'bob' }),
        sub.cnd.str.eq({ obj: { src: 'user.team' }, value: 'blue' }),
      ]),
    },
    {
      name: 'an unknown user gets null',
      transforms: [sub.tf.test.message({ value: { user_id: 'u9' } })],
      outputs: 1,
      // null: present (a missing key fails every condition) with empty text.
      condition: sub.cnd.str.eq({ obj: { src: 'user' }, value: '' }),
    },
  ],
  transforms: [
    sub.tf.enrich.kv_store.iget({ kv_store: users, obj: { src: 'user_id', trg: 'user' } }),
    sub.tf.send.stdout(),
  ],
}

// Writes one NDJSON file per batch under
// /tmp/sluice-examples/send_file/YYYY/MM/DD/<uuid>.jsonl. Each file appears complete or not
// at all (it is written under a temporary name and renamed). send_file concatenates items
// without a separator, so the auxiliary transforms join them with newlines and end the file
// with one.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'events-are-written-and-pass-through',
      transforms: [
        sub.tf.test.message({ value: { user: 'alice', n: 1 } }),
        sub.tf.test.message({ value: { user: 'bob', n: 2 } }),
      ],
      condition: sub.cnd.num.gt({ obj: { src: 'n' }, value: 0 }),
    },
  ],
  transforms: [
    sub.tf.send.file({
      file_path: {
        prefix: '/tmp/sluice-examples/send_file',
        time_format: '2006/01/02',
        uuid: true,
        suffix: '.jsonl',
      },
      aux_tforms: [
        sub.tf.aggregate.to.string({ separator: '\n' }),
        sub.tf.str.append({ suffix: '\n' }),
      ],
    }),
  ],
}

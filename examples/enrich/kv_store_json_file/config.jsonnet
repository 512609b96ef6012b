// Look a team up in a JSON document: the event's `team` is a path into teams.json
// (`red`; a nested document would take `a.b.c` paths).
//
//   sluice run -c examples/enrich/kv_store_json_file/config.jsonnet <<< '{"team":"red"}'
local sub = std.extVar('sub');

local teams = sub.kv_store.json_file({ file: 'examples/enrich/kv_store_json_file/teams.json' });

{
  tests: [
    {
      name: 'the team object is found by path',
      transforms: [sub.tf.test.message({ value: { team: 'blue' } })],
      outputs: 1,
      condition: sub.cnd.str.eq({ obj: { src: 'team_info.lead' }, value: 'bob' }),
    },
  ],
  transforms: [
    sub.tf.enrich.kv_store.iget({ kv_store: teams, obj: { src: 'team', trg: 'team_info' } }),
    sub.tf.send.stdout(),
  ],
}

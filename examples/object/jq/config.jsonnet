// Reshapes a connection log with a jq filter: picks and renames fields, keeps the ports of
// the connections that were accepted, and counts them. The filter is compiled once, when
// the pipeline is built; a filter that does not parse is a config error at
// settings.filter with the column.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'reshape',
      transforms: [
        sub.tf.test.message({ value: {
          host: { name: 'web-1', ip: '10.0.0.5' },
          conns: [
            { port: 22, action: 'accept' },
            { port: 23, action: 'reject' },
            { port: 443, action: 'accept' },
          ],
        } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'host' }, value: 'web-1' }),
        sub.cnd.str.eq({ obj: { src: 'ports' }, value: '[22,443]' }),
        sub.cnd.num.eq({ obj: { src: 'accepted' }, value: 2 }),
        sub.cnd.str.eq({ obj: { src: 'severity' }, value: 'low' }),
      ]),
    },
    {
      // Several results become one JSON array.
      name: 'several-results',
      transforms: [
        sub.tf.test.message({ value: { host: { name: 'db-1' }, conns: [{ port: 5432, action: 'reject' }] } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'host' }, value: 'db-1' }),
        sub.cnd.num.eq({ obj: { src: 'accepted' }, value: 0 }),
        sub.cnd.str.eq({ obj: { src: 'severity' }, value: 'high' }),
      ]),
    },
  ],
  transforms: [
    sub.tf.obj.jq({ filter: |||
      [.conns[] | select(.action == "accept") | .port] as $ports
      | {
          host: .host.name,
          ports: $ports,
          accepted: ($ports | length),
          severity: (if ($ports | length) > 0 then "low" else "high" end)
        }
    ||| }),
    sub.tf.send.stdout(),
  ],
}

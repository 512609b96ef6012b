// Zeek conn log -> Elastic Common Schema: the mapping of benches/zeek/zeek_to_ecs.jq as a
// sluice pipeline. benches/zeek/bench.py runs it against jq and checks the outputs match.
local sub = std.extVar('sub');

local orig(key) = 'event.original.' + key;
local cp(src, trg) = sub.tf.obj.cp({ obj: { src: orig(src), trg: trg } });

{
  tests: [
    {
      name: 'maps-a-conn-event',
      transforms: [
        sub.tf.test.message({ value: {
          ts: 1591367999.430166,
          uid: 'C5bLoe2Mvxqhawzqqd000001',
          'id.orig_h': '192.168.4.76',
          'id.orig_p': 46378,
          'id.resp_h': '31.3.245.133',
          'id.resp_p': 80,
          proto: 'tcp',
          service: 'http',
          duration: 0.25,
          orig_bytes: 10,
          resp_bytes: 20,
          conn_state: 'SF',
          missed_bytes: 0,
          history: 'ShADadFf',
          orig_pkts: 3,
          orig_ip_bytes: 100,
          resp_pkts: 4,
          resp_ip_bytes: 200,
        } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'event.hash' }, value: 'c5bloe2mvxqhawzqqd000001' }),
        sub.cnd.str.eq({ obj: { src: 'event.outcome' }, value: 'success' }),
        sub.cnd.str.eq({ obj: { src: '\\@timestamp' }, value: '2020-06-05T14:39:59Z' }),
        sub.cnd.num.eq({ obj: { src: 'event.duration' }, value: 250000000 }),
        sub.cnd.num.eq({ obj: { src: 'network.bytes' }, value: 30 }),
        sub.cnd.num.eq({ obj: { src: 'network.packets' }, value: 7 }),
        sub.cnd.str.eq({ obj: { src: 'server.address' }, value: '31.3.245.133' }),
      ]),
    },
  ],
  transforms: [
    // The whole Zeek event becomes event.original of a new object.
    sub.tf.obj.cp({ obj: { trg: 'event.original' } }),
    cp('uid', 'event.id'),
    sub.tf.str.to.lower({ obj: { src: orig('uid'), trg: 'event.hash' } }),
    sub.tf.obj.insert({ obj: { trg: 'event.kind' }, value: 'event' }),
    sub.tf.obj.insert({ obj: { trg: 'event.category' }, value: ['network'] }),
    sub.tf.obj.insert({ obj: { trg: 'event.action' }, value: 'network-connection' }),
    sub.tf.meta.switch({ cases: [
      {
        condition: sub.cnd.str.eq({ obj: { src: orig('conn_state') }, value: 'SF' }),
        transforms: [sub.tf.obj.insert({ obj: { trg: 'event.outcome' }, value: 'success' })],
      },
      { transforms: [sub.tf.obj.insert({ obj: { trg: 'event.outcome' }, value: 'failure' })] },
    ] }),
    // A GJSON multipath with a literal builds [duration, 1e9] to multiply.
    sub.tf.num.math.mul({ obj: { src: '[' + orig('duration') + ',!1000000000]', trg: 'event.duration' } }),
    sub.tf.time.from.unix({ obj: { src: orig('ts'), trg: '\\@timestamp' } }),
    sub.tf.time.to.string({ obj: { src: '\\@timestamp', trg: '\\@timestamp' }, format: '2006-01-02T15:04:05Z' }),
    cp('id\\.orig_h', 'client.address'),
    cp('id\\.orig_h', 'client.ip'),
    cp('id\\.orig_p', 'client.port'),
    cp('orig_pkts', 'client.packets'),
    cp('orig_bytes', 'client.bytes'),
    cp('id\\.resp_h', 'server.address'),
    cp('id\\.resp_h', 'server.ip'),
    cp('id\\.resp_p', 'server.port'),
    cp('resp_pkts', 'server.packets'),
    cp('resp_bytes', 'server.bytes'),
    cp('proto', 'network.transport'),
    cp('service', 'network.protocol'),
    sub.tf.num.math.add({ obj: { src: '[' + orig('orig_bytes') + ',' + orig('resp_bytes') + ']', trg: 'network.bytes' } }),
    sub.tf.num.math.add({ obj: { src: '[' + orig('orig_pkts') + ',' + orig('resp_pkts') + ']', trg: 'network.packets' } }),
    sub.tf.send.stdout(),
  ],
}

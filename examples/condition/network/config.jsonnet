// Classifies the source address of connection events with the network_ip_* conditions
// (Go's net.IP semantics): loopback, private (RFC 1918 / ULA), other global unicast, or
// not an address at all. The first matching case wins.
local sub = std.extVar('sub');

local ip(f) = f({ obj: { src: 'src_ip' } });
local scope(v) = sub.cnd.str.eq({ obj: { src: 'scope' }, value: v });

{
  tests: [
    {
      name: 'classifies-addresses',
      transforms: [
        sub.tf.test.message({ value: { src_ip: '127.0.0.1' } }),
        sub.tf.test.message({ value: { src_ip: '172.16.4.2' } }),
        sub.tf.test.message({ value: { src_ip: 'fd12::1' } }),
        sub.tf.test.message({ value: { src_ip: '2001:4860:4860::8888' } }),
        sub.tf.test.message({ value: { src_ip: 'localhost' } }),
      ],
      condition: sub.cnd.any([
        sub.cnd.all([ip(sub.cnd.net.ip.loopback), scope('loopback')]),
        sub.cnd.all([ip(sub.cnd.net.ip.private), scope('private')]),
        sub.cnd.all([
          ip(sub.cnd.net.ip.global_unicast),
          sub.cnd.none([ip(sub.cnd.net.ip.private)]),
          scope('public'),
        ]),
        sub.cnd.all([sub.cnd.none([ip(sub.cnd.net.ip.valid)]), scope('invalid')]),
      ]),
    },
  ],
  transforms: [
    sub.tf.meta.switch({ cases: [
      {
        condition: sub.cnd.none([ip(sub.cnd.net.ip.valid)]),
        transforms: [sub.tf.obj.insert({ obj: { trg: 'scope' }, value: 'invalid' })],
      },
      {
        condition: ip(sub.cnd.net.ip.loopback),
        transforms: [sub.tf.obj.insert({ obj: { trg: 'scope' }, value: 'loopback' })],
      },
      {
        condition: ip(sub.cnd.net.ip.private),
        transforms: [sub.tf.obj.insert({ obj: { trg: 'scope' }, value: 'private' })],
      },
      {
        condition: ip(sub.cnd.net.ip.global_unicast),
        transforms: [sub.tf.obj.insert({ obj: { trg: 'scope' }, value: 'public' })],
      },
    ] }),
    sub.tf.send.stdout(),
  ],
}

// Encodes a value as base64 and decodes it again. Decoded JSON is written as JSON;
// decoded bytes that are not UTF-8 cannot be written into an object (an error).
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'base64',
      transforms: [
        sub.tf.test.message({ value: { user: { name: 'alice' }, token: 'aGVsbG8gd29ybGQ=' } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'encoded' }, value: 'eyJuYW1lIjoiYWxpY2UifQ==' }),
        sub.cnd.str.eq({ obj: { src: 'decoded.name' }, value: 'alice' }),
        sub.cnd.str.eq({ obj: { src: 'token' }, value: 'hello world' }),
      ]),
    },
  ],
  transforms: [
    sub.tf.fmt.to.base64({ obj: { src: 'user', trg: 'encoded' } }),
    sub.tf.fmt.from.base64({ obj: { src: 'encoded', trg: 'decoded' } }),
    sub.tf.fmt.from.base64({ obj: { src: 'token', trg: 'token' } }),
    sub.tf.send.stdout(),
  ],
}

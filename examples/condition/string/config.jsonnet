// Drops lines that are not JSON, then flags requests whose user agent looks like a bot.
// `format_json` tests the whole data; `string_match` is an unanchored regular expression
// (RE2 syntax) on the value at `obj.src`.
local sub = std.extVar('sub');

local is_bot = sub.cnd.str.match({ obj: { src: 'ua' }, pattern: '(?i)(bot|crawler|spider)' });

{
  tests: [
    {
      name: 'drops-text-and-flags-bots',
      transforms: [
        sub.tf.test.message({ value: 'not json at all' }),
        sub.tf.test.message({ value: { ua: 'Mozilla/5.0 (compatible; Googlebot/2.1)' } }),
        sub.tf.test.message({ value: { ua: 'Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0' } }),
      ],
      // Only JSON remains, and `bot` is set exactly on the bots.
      condition: sub.cnd.all([
        sub.cnd.fmt.json(),
        sub.cnd.any([
          sub.cnd.all([is_bot, sub.cnd.str.eq({ obj: { src: 'bot' }, value: 'true' })]),
          sub.cnd.all([
            sub.cnd.none([is_bot]),
            sub.cnd.str.eq({ obj: { src: 'bot' }, value: 'false' }),
          ]),
        ]),
      ]),
    },
  ],
  transforms: [
    sub.tf.meta.switch({ cases: [
      { condition: sub.cnd.none([sub.cnd.fmt.json()]), transforms: [sub.tf.util.drop()] },
    ] }),
    sub.tf.meta.switch({ cases: [
      { condition: is_bot, transforms: [sub.tf.obj.insert({ obj: { trg: 'bot' }, value: true })] },
      { transforms: [sub.tf.obj.insert({ obj: { trg: 'bot' }, value: false })] },
    ] }),
    sub.tf.send.stdout(),
  ],
}

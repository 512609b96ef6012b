// Patterns are Go's (RE2), as in Substation, including what Rust's regex reads otherwise:
// a `{` that cannot start a repetition is a literal, `\d` is ASCII only, `\Q...\E` quotes.
// Named groups (`(?P<name>...)`) become an object, replacing a string already at the target.
// string_to_snake splits words as Go's strcase does.
local sub = std.extVar('sub');

{
  tests: [
    {
      name: 'json-looking-lines-and-named-groups',
      transforms: [
        sub.tf.test.message({ value: { line: '{app=web} user=alice id=٣7', parsed: 'pending', Kind: 'HTTPServer' } }),
      ],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'shape' }, value: 'braced' }),
        sub.cnd.str.eq({ obj: { src: 'parsed.user' }, value: 'alice' }),
        // \d is ASCII: the Arabic-Indic digit is not one.
        sub.cnd.str.eq({ obj: { src: 'digits' }, value: '7' }),
        sub.cnd.str.eq({ obj: { src: 'kind' }, value: 'http_server' }),
      ]),
    },
  ],
  transforms: [
    sub.tf.meta.switch({ cases: [{
      condition: sub.cnd.str.match({ obj: { src: 'line' }, pattern: '^{.*}' }),
      transforms: [sub.tf.obj.insert({ obj: { trg: 'shape' }, value: 'braced' })],
    }] }),
    sub.tf.str.capture({ obj: { src: 'line', trg: 'parsed' }, pattern: '\\Q}\\E user=(?P<user>\\w+)' }),
    sub.tf.str.capture({ obj: { src: 'line', trg: 'digits' }, pattern: '(\\d+)$' }),
    sub.tf.str.to.snake({ obj: { src: 'Kind', trg: 'kind' } }),
    sub.tf.send.stdout(),
  ],
}

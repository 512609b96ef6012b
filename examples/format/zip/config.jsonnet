// Unpacks a ZIP archive (e.g. an object read from S3) into one message per file, then
// splits each file into its lines. Directories and empty files yield nothing; the
// metadata of the archive's message is copied to every file's message.
//
// The test's archive (base64 below) was made with Python's zipfile module, deflated:
//   logs/            (a directory)
//   logs/app.json    two JSON lines
//   logs/empty.log   empty
//   logs/db.json     one JSON line
local sub = std.extVar('sub');

local archive = 'UEsDBBQAAAAAAAAAIQAAAAAAAAAAAAAAAAAFAAAAbG9ncy9QSwMEFAAAAAgAGZB1XWg9FBtBAAAAXgAAAA0AAABsb2dzL2FwcC5qc29uq1ZKLChQslIqT01S0lHKSS1LzQHyMvPS8oHc3OJ0IKe4JLGoJDVFqZarGqvi8sSiPITinPxyhaLUwtLU4hKlWgBQSwMEFAAAAAgAGZB1XQAAAAACAAAAAAAAAA4AAABsb2dzL2VtcHR5LmxvZwMAUEsDBBQAAAAIABmQdV3nqq8WKwAAAC4AAAAMAAAAbG9ncy9kYi5qc29uq1ZKLChQslJKSVLSUcpJLUvNAXJSi4ryi4D83OJ0kFRmcbZCWmlOjlItAFBLAQIUAxQAAAAAAAAAIQAAAAAAAAAAAAAAAAAFAAAAAAAAAAAAAACAAQAAAABsb2dzL1BLAQIUAxQAAAAIABmQdV1oPRQbQQAAAF4AAAANAAAAAAAAAAAAAACAASMAAABsb2dzL2FwcC5qc29uUEsBAhQDFAAAAAgAGZB1XQAAAAACAAAAAAAAAA4AAAAAAAAAAAAAAIABjwAAAGxvZ3MvZW1wdHkubG9nUEsBAhQDFAAAAAgAGZB1XeeqrxYrAAAALgAAAAwAAAAAAAAAAAAAAIABvQAAAGxvZ3MvZGIuanNvblBLBQYAAAAABAAEAOQAAAASAQAAAAA=';

{
  tests: [
    {
      name: 'one-message-per-line-of-each-file',
      transforms: [
        sub.tf.test.message({ value: archive }),
        sub.tf.fmt.from.b64(),
      ],
      condition: sub.cnd.all([
        sub.cnd.any([
          sub.cnd.str.eq({ obj: { src: 'app' }, value: 'web' }),
          sub.cnd.str.eq({ obj: { src: 'app' }, value: 'db' }),
        ]),
        sub.cnd.num.len.gt({ obj: { src: 'msg' }, value: 0 }),
      ]),
      // app.json has two lines and db.json one; the directory and the empty file none.
      outputs: 3,
    },
  ],
  transforms: [
    sub.tf.fmt.from.zip(),
    sub.tf.agg.from.str({ separator: '\n' }),
    sub.tf.send.stdout(),
  ],
}

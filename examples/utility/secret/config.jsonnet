// Loads a secret into the secrets cache, so that `${SECRET:id}` in the HTTP transforms'
// URLs and headers is replaced by it (they are not run here: the example runs offline).
// The secret comes from an environment variable; `HOME` is used because it is set
// everywhere this example is tested; in production name your own (e.g. API_TOKEN), or use
// `sub.secrets.aws.secrets_manager({ id: 'token', aws: { arn: '...' } })`. An unset
// variable is an error when the config is loaded. Messages pass through unchanged.
local sub = std.extVar('sub');

local token = sub.secrets.environment_variable({ id: 'token', name: 'HOME', ttl_offset: '1h' });

{
  tests: [
    {
      name: 'messages pass unchanged',
      transforms: [
        sub.tf.test.message({ value: { user: 'ann' } }),
      ],
      condition: sub.cnd.str.eq({ obj: { src: 'user' }, value: 'ann' }),
    },
  ],
  transforms: [
    sub.tf.util.secret({ secret: token }),
    // With a reachable API, e.g.:
    // sub.tf.enrich.http.get({
    //   url: 'https://api.example.com/users/${DATA}',
    //   headers: { Authorization: 'Bearer ${SECRET:token}' },
    //   obj: { src: 'user', trg: 'profile' },
    // }),
    sub.tf.send.stdout(),
  ],
}

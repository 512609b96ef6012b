// The pipeline `sluice demo` runs: one AWS CloudTrail event (a failed console sign-in)
// normalised to the Elastic Common Schema (ECS). It shows the common moves: the event set
// aside whole, fields copied to their ECS names, constants inserted, a hash, a regular
// expression capture, and a branch on a condition.
//
//   sluice demo                                  # this config over its built-in event
//   sluice run -c examples/demo/config.jsonnet < cloudtrail.jsonl
local sub = std.extVar('sub');

local event = {
  eventVersion: '1.08',
  userIdentity: {
    type: 'IAMUser',
    principalId: 'AIDA6ON6E4XEGITEXAMPLE',
    arn: 'arn:aws:iam::888888888888:user/Mary',
    accountId: '888888888888',
    userName: 'Mary',
  },
  eventTime: '2024-01-15T18:44:03Z',
  eventSource: 'signin.amazonaws.com',
  eventName: 'ConsoleLogin',
  awsRegion: 'us-east-1',
  sourceIPAddress: '192.0.2.30',
  userAgent: 'Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0',
  errorMessage: 'Failed authentication',
  requestParameters: null,
  responseElements: { ConsoleLogin: 'Failure' },
  additionalEventData: { MFAUsed: 'Yes' },
  eventID: 'a12b3c4d-5e6f-47a8-9b0c-1d2e3f4a5b6c',
  readOnly: false,
  eventType: 'AwsConsoleSignIn',
  recipientAccountId: '888888888888',
};

{
  // `sluice demo` reads its input from here.
  demo: event,

  tests: [
    {
      name: 'failed-sign-in-becomes-ecs',
      transforms: [sub.tf.test.message({ value: event })],
      condition: sub.cnd.all([
        sub.cnd.str.eq({ obj: { src: 'event.action' }, value: 'ConsoleLogin' }),
        sub.cnd.str.eq({ obj: { src: 'event.outcome' }, value: 'failure' }),
        sub.cnd.str.eq({ obj: { src: 'cloud.service.name' }, value: 'signin' }),
        sub.cnd.str.eq({ obj: { src: 'user.name' }, value: 'Mary' }),
        sub.cnd.num.len.eq({ obj: { src: 'event.hash' }, value: 64 }),
        sub.cnd.str.eq({ obj: { src: 'event.original.eventID' }, value: event.eventID }),
      ]),
    },
    {
      name: 'a-sign-in-without-an-error-succeeded',
      transforms: [sub.tf.test.message({ value: event { errorMessage: null, responseElements: { ConsoleLogin: 'Success' } } })],
      condition: sub.cnd.str.eq({ obj: { src: 'event.outcome' }, value: 'success' }),
    },
  ],

  transforms: [
    // The whole event goes into metadata: the data starts empty and only ECS fields are
    // written to it.
    sub.tf.obj.cp({ obj: { trg: 'meta cloudtrail' } }),
    sub.tf.obj.cp({ obj: { src: 'meta cloudtrail', trg: 'event.original' } }),
    sub.tf.hash.sha256({ obj: { src: 'meta cloudtrail', trg: 'event.hash' } }),
    sub.tf.obj.insert({ obj: { trg: 'event.kind' }, value: 'event' }),
    sub.tf.obj.insert({ obj: { trg: 'event.dataset' }, value: 'aws.cloudtrail' }),
    sub.tf.obj.insert({ obj: { trg: 'event.category' }, value: ['authentication'] }),
    sub.tf.obj.insert({ obj: { trg: 'event.type' }, value: ['start'] }),
    sub.tf.obj.cp({ obj: { src: 'meta cloudtrail.eventName', trg: 'event.action' } }),
    sub.tf.obj.cp({ obj: { src: 'meta cloudtrail.eventID', trg: 'event.id' } }),
    // An error message means the action failed.
    sub.tf.meta.switch({ cases: [
      {
        condition: sub.cnd.num.len.gt({ obj: { src: 'meta cloudtrail.errorMessage' }, value: 0 }),
        transforms: [sub.tf.obj.insert({ obj: { trg: 'event.outcome' }, value: 'failure' })],
      },
      {
        transforms: [sub.tf.obj.insert({ obj: { trg: 'event.outcome' }, value: 'success' })],
      },
    ] }),
    sub.tf.obj.cp({ obj: { src: 'meta cloudtrail.eventTime', trg: '@timestamp' } }),
    sub.tf.obj.cp({ obj: { src: 'meta cloudtrail.sourceIPAddress', trg: 'source.ip' } }),
    sub.tf.obj.cp({ obj: { src: 'meta cloudtrail.userAgent', trg: 'user_agent.original' } }),
    sub.tf.obj.cp({ obj: { src: 'meta cloudtrail.userIdentity.userName', trg: 'user.name' } }),
    sub.tf.obj.insert({ obj: { trg: 'cloud.provider' }, value: 'aws' }),
    sub.tf.obj.cp({ obj: { src: 'meta cloudtrail.awsRegion', trg: 'cloud.region' } }),
    sub.tf.obj.cp({ obj: { src: 'meta cloudtrail.recipientAccountId', trg: 'cloud.account.id' } }),
    // signin.amazonaws.com -> signin
    sub.tf.str.capture({
      obj: { src: 'meta cloudtrail.eventSource', trg: 'cloud.service.name' },
      pattern: '^([^.]+)\\.amazonaws\\.com$',
    }),
    sub.tf.send.stdout(),
  ],
}

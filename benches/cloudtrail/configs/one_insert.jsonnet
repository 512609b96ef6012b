// One key added to each CloudTrail event, nothing read: today the whole event is parsed and
// written back for it (docs/performance.md's CloudTrail rows).
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.obj.insert({ obj: { trg: 'event.kind' }, value: 'event' }),
    sub.tf.send.stdout(),
  ],
}

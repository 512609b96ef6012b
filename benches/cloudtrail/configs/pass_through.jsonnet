// The CloudTrail events written as they came: no transform reads them, so sluice never parses
// them. The floor under examples/benchmark/cloudtrail (docs/performance.md's CloudTrail rows).
local sub = std.extVar('sub');
{
  transforms: [sub.tf.send.stdout()],
}

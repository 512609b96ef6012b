// sluice.libsonnet: the Jsonnet library of sluice.
//
// It offers Substation's function tree so that Substation configs run unchanged:
//
//   local sub = std.extVar('sub');           // or: import 'sluice.libsonnet'
//                                            // or: import 'substation.libsonnet'
//   {
//     transforms: [
//       sub.tf.obj.cp({ obj: { src: 'a', trg: 'b' } }),
//       sub.tf.send.stdout(),
//     ],
//   }
//
// Top level: `transform` (alias `tf`), `condition` (alias `cnd`), `kv_store`, `secrets`,
// `config` (the shared defaults) and `file_path` (the default file path of sends).
//
// Every function takes `settings={}` and returns `{type, settings}`. The settings are the
// function's defaults merged (JSON merge patch) with the caller's settings after the
// abbreviations were expanded, with nulls and empty arrays/objects removed, so that unset
// options vanish and the engine's defaults apply. Transforms also get an automatic `id`,
// md5(type)[0:8] + '-' + md5(std.toString(caller's settings))[0:8], unless the caller gave one
// (std.toString as go-jsonnet, which Substation uses, writes it: `-1.1` as
// `-1.1000000000000001`).
//
// Abbreviations: `obj` -> `object`; inside `object`: `src` -> `source_key`, `trg` ->
// `target_key`, `btch` -> `batch_key`; `aux_tforms` -> `auxiliary_transforms`; `hdr` ->
// `headers`; `repl` -> `replacement`; `sep` -> `separator`. Giving both the short and the long
// name with different values is an error that names both.
//
// Where this library differs from Substation's substation.libsonnet (v2.8), on purpose:
//   1. `btch` works. Substation's expansion reads `batch`, so any use of `btch` fails.
//   2. (none: `transform.enrich.dns.txt_lookup` emits Substation's `enrich_dns_txt_lookup`,
//      which sluice's engine builds; Substation's own engine only knows
//      `enrich_dns_text_lookup`, which sluice also builds.)
//   3. (none: `transform.enrich.kv_store.item.get/set` emit Substation's
//      `enrich_kv_store_get/_set`; the engine also builds `enrich_kv_store_item_get/_set`.)
//   4. `kv_store.json_file()` works without an argument (Substation's default argument
//      points at a field that does not exist).
//   5. (none: `transform.send.aws.lambda` keeps Substation's unpruned nulls.)
//   6. (none: `condition.format.json()` and `condition.utility.random()` return just
//      `{type}`, as Substation's do, whatever the argument; neither has a setting.)
//   7. `transform.enrich.http.post` moves a top-level `body_key` into `object.body_key`, where
//      the engine reads it; Substation leaves it at the top level, where it is ignored (the
//      id is computed from the caller's settings, so it is the same). `enrich.http.*` inject
//      `request: {timeout: '1s'}` as Substation's do; sluice's engine honours it (Substation's
//      ignores it and waits without limit).
//   8. A `value` setting (object_insert, test_message, the comparison conditions) is kept
//      exactly as given: neither the merge patch nor the pruning touch it, so `value: {}`,
//      `value: []` and nulls inside a value survive. Substation's library drops them.
//   9. `transform.meta.kv_store.lock` does not inject `ttl_offset: '0s'`: a lock without a
//      TTL gets the transform's documented 24-hour default instead of a TTL of 0, which
//      silently disables deduplication in Substation.
//  10. Settings that are not an object, and conflicting abbreviations, are reported with
//      the type name instead of failing somewhere inside the library.
//  11. Extra aliases: `time.to.unix`/`time.to.unix_milli` (Substation only has
//      `time.unix`/`time.unix_milli`, both are offered), `enrich.dns.text_lookup`,
//      `string.repl`.

local helpers = {
  // The short names a caller may use, by where they apply: [short, long].
  top_abbv:: [
    ['obj', 'object'],
    ['aux_tforms', 'auxiliary_transforms'],
    ['hdr', 'headers'],
    ['repl', 'replacement'],
    ['sep', 'separator'],
  ],
  object_abbv:: [
    ['src', 'source_key'],
    ['trg', 'target_key'],
    ['btch', 'batch_key'],
  ],

  // Renames the short keys of `s` to their long names.
  rename(s, pairs, where)::
    local shorts = [p[0] for p in pairs];
    local renamed = [p for p in pairs if std.objectHas(s, p[0])];
    local conflicts = [
      p
      for p in renamed
      if std.objectHas(s, p[1]) && s[p[0]] != s[p[1]]
    ];
    if std.length(conflicts) > 0 then
      error '%s: both `%s` and `%s` are set; use one of them' % [
        where,
        conflicts[0][0],
        conflicts[0][1],
      ]
    else
      { [k]: s[k] for k in std.objectFields(s) if !std.member(shorts, k) }
      + { [p[1]]: s[p[0]] for p in renamed },

  // Expands every abbreviation of a settings object.
  abbv(s, where)::
    local top = helpers.rename(s, helpers.top_abbv, where);
    if std.objectHas(top, 'object') && std.isObject(top.object) then
      top { object: helpers.rename(top.object, helpers.object_abbv, where + ' object') }
    else top,

  // true when std.prune would keep v.
  content(v)::
    !(v == null
      || (std.isArray(v) && std.length(v) == 0)
      || (std.isObject(v) && std.length(v) == 0)),

  // std.prune, except that a non-null `value` is kept as it is (see note 8 above).
  prune(x)::
    if std.isObject(x) then
      local kept = {
        [k]: if k == 'value' then x[k] else helpers.prune(x[k])
        for k in std.objectFields(x)
      };
      {
        [k]: kept[k]
        for k in std.objectFields(kept)
        if (k == 'value' && kept[k] != null) || helpers.content(kept[k])
      }
    else if std.isArray(x) then
      [e for e in std.map(helpers.prune, x) if helpers.content(e)]
    else x,

  // The automatic id of a transform.
  // (std.toString with go-jsonnet's number text, as Substation's ids are computed.)
  id(type, settings)::
    std.md5(type)[0:8] + '-' + std.md5(std.native('sluice_go_to_string')(settings))[0:8],

  // Builds `{type, settings}`.
  //   with_id: transforms get an automatic id, conditions, kv stores and secrets do not.
  //   fix: a last rewrite of the expanded settings (see enrich.http.post).
  build(type, defaults, settings, with_id, fix, prune=true)::
    if !std.isObject(settings) then
      error '%s: settings must be an object, not %s' % [type, std.type(settings)]
    else
      local s = fix(helpers.abbv(settings, type));
      local rest = { [k]: s[k] for k in std.objectFields(s) if k != 'value' };
      local d = defaults + (if with_id then { id: helpers.id(type, settings) } else {});
      local patched = std.mergePatch(d, rest);
      local merged = (if prune then helpers.prune(patched) else patched)
                     + (if std.objectHas(s, 'value') && s.value != null then { value: s.value } else {});
      // Settings are checked when the function is called, not when the config is
      // manifested, so that an error's trace includes the caller's line.
      if std.isObject(merged) then { type: type, settings: merged } else error 'unreachable',

  same(s):: s,
};

// A transform function of `type` with `defaults`.
local transform(type, defaults={}, fix=helpers.same) =
  function(settings={}) helpers.build(type, defaults, settings, true, fix);

// A transform function whose settings keep their nulls (as Substation's send.aws.lambda).
local transform_unpruned(type, defaults={}) =
  function(settings={}) helpers.build(type, defaults, settings, true, helpers.same, false);

// A condition that has no settings: `{type}` alone, as Substation's library returns it (the
// argument is checked and ignored). The ids of the transforms that hold it depend on it.
local bare(type) =
  function(settings={})
    if !std.isObject(settings) then
      error '%s: settings must be an object, not %s' % [type, std.type(settings)]
    else { type: type };

// A condition, kv store or secret function (no automatic id).
local plain(type, defaults={}) =
  function(settings={}) helpers.build(type, defaults, settings, false, helpers.same);

// enrich_http_post reads `object.body_key`; accept it at the top level too.
local move_body_key(s) =
  if std.objectHas(s, 'body_key') then
    local obj = if std.objectHas(s, 'object') && std.isObject(s.object) then s.object else {};
    if std.objectHas(obj, 'body_key') && obj.body_key != s.body_key then
      error 'enrich_http_post: both `body_key` and `object.body_key` are set; use `object.body_key`'
    else
      { [k]: s[k] for k in std.objectFields(s) if k != 'body_key' }
      + { object: obj { body_key: s.body_key } }
  else s;

// Wraps one condition or a list of conditions.
local as_list(x) = if std.isArray(x) then x else [x];

{
  // Shared defaults. Overriding them (`sub + { config+: {...} }`) changes every function's
  // defaults, as in Substation.
  config: {
    aws: { arn: null, assume_role_arn: null },
    gcp: { resource: null },
    batch: { count: 1000, size: 1000000, duration: '1m' },
    metric: { name: null, attributes: null, destination: null },
    object: { source_key: null, target_key: null, batch_key: null },
    request: { timeout: '1s' },
    retry: { count: 3, delay: '1s' },
  },

  // The default file path of send_aws_s3, send_file and send_gcp_storage:
  // [prefix]/[time_format]/[uuid][suffix].
  file_path: { prefix: null, time_format: '2006/01/02', uuid: true, suffix: null },

  local send_defaults = {
    batch: $.config.batch,
    auxiliary_transforms: null,
    object: $.config.object,
  },
  local send_aws_defaults = send_defaults { aws: $.config.aws },
  local obj = { object: $.config.object },

  condition: {
    all(x): $.condition.meta.all({ conditions: as_list(x) }),
    any(x): $.condition.meta.any({ conditions: as_list(x) }),
    none(x): $.condition.meta.none({ conditions: as_list(x) }),

    meta: {
      local d = { object: $.config.object, conditions: [] },
      all: plain('meta_all', d),
      any: plain('meta_any', d),
      none: plain('meta_none', d),
    },

    format: {
      json: bare('format_json'),
      mime: plain('format_mime', { type: null }),
    },
    fmt: $.condition.format,

    network: {
      ip: {
        global_unicast: plain('network_ip_global_unicast', obj),
        link_local_multicast: plain('network_ip_link_local_multicast', obj),
        link_local_unicast: plain('network_ip_link_local_unicast', obj),
        loopback: plain('network_ip_loopback', obj),
        multicast: plain('network_ip_multicast', obj),
        private: plain('network_ip_private', obj),
        unicast: plain('network_ip_unicast', obj),
        unspecified: plain('network_ip_unspecified', obj),
        valid: plain('network_ip_valid', obj),
      },
    },
    net: $.condition.network,

    number: {
      local d = { object: $.config.object, value: null },
      equal_to: plain('number_equal_to', d),
      eq: self.equal_to,
      greater_than: plain('number_greater_than', d),
      gt: self.greater_than,
      less_than: plain('number_less_than', d),
      lt: self.less_than,
      bitwise: {
        and: plain('number_bitwise_and', d),
        or: plain('number_bitwise_or', d),
        xor: plain('number_bitwise_xor', d),
        not: plain('number_bitwise_not', obj),
      },
      length: {
        local l = d { measurement: 'byte' },
        equal_to: plain('number_length_equal_to', l),
        eq: self.equal_to,
        greater_than: plain('number_length_greater_than', l),
        gt: self.greater_than,
        less_than: plain('number_length_less_than', l),
        lt: self.less_than,
      },
      len: self.length,
    },
    num: $.condition.number,

    string: {
      local d = { object: $.config.object, value: null },
      contains: plain('string_contains', d),
      has: self.contains,
      ends_with: plain('string_ends_with', d),
      suffix: self.ends_with,
      equal_to: plain('string_equal_to', d),
      eq: self.equal_to,
      greater_than: plain('string_greater_than', d),
      gt: self.greater_than,
      less_than: plain('string_less_than', d),
      lt: self.less_than,
      starts_with: plain('string_starts_with', d),
      prefix: self.starts_with,
      match: plain('string_match', { object: $.config.object, pattern: null }),
    },
    str: $.condition.string,

    utility: {
      random: bare('utility_random'),
    },
    util: $.condition.utility,
  },
  cnd: $.condition,

  transform: {
    aggregate: {
      from: {
        array: transform('aggregate_from_array', obj),
        arr: self.array,
        string: transform('aggregate_from_string', { separator: null }),
        str: self.string,
      },
      to: {
        array: transform('aggregate_to_array', { object: $.config.object, batch: $.config.batch }),
        arr: self.array,
        string: transform('aggregate_to_string', {
          object: $.config.object,
          batch: $.config.batch,
          separator: null,
        }),
        str: self.string,
      },
    },
    agg: $.transform.aggregate,

    array: {
      join: transform('array_join', { object: $.config.object, separator: null }),
      zip: transform('array_zip', obj),
    },
    arr: $.transform.array,

    enrich: {
      aws: {
        dynamodb: {
          query: transform('enrich_aws_dynamodb_query', {
            object: $.config.object,
            aws: $.config.aws,
            attributes: { partition_key: null, sort_key: null },
            limit: 1,
            scan_index_forward: false,
          }),
        },
        lambda: transform('enrich_aws_lambda', { object: $.config.object, aws: $.config.aws }),
      },
      dns: {
        local d = { object: $.config.object, request: $.config.request },
        domain_lookup: transform('enrich_dns_domain_lookup', d),
        ip_lookup: transform('enrich_dns_ip_lookup', d),
        txt_lookup: transform('enrich_dns_txt_lookup', d),
        text_lookup: self.txt_lookup,
      },
      http: {
        get: transform('enrich_http_get', {
          object: $.config.object,
          request: $.config.request,
          url: null,
          headers: null,
        }),
        post: transform(
          'enrich_http_post',
          {
            object: $.config.object { body_key: null },
            request: $.config.request,
            url: null,
            headers: null,
          },
          move_body_key
        ),
      },
      kv_store: {
        local d = {
          object: $.config.object,
          kv_store: null,
          prefix: null,
          close_kv_store: false,
        },
        local set_d = d {
          object: $.config.object { ttl_key: null },
          ttl_offset: '0s',
        },
        item: {
          get: transform('enrich_kv_store_get', d),
          set: transform('enrich_kv_store_set', set_d),
        },
        iget: self.item.get,
        iset: self.item.set,
        set: {
          add: transform('enrich_kv_store_set_add', set_d),
        },
        sadd: self.set.add,
      },
    },

    format: {
      from: {
        base64: transform('format_from_base64', obj),
        b64: self.base64,
        gzip: transform('format_from_gzip'),
        gz: self.gzip,
        parquet: transform('format_from_parquet'),
        pretty_print: transform('format_from_pretty_print'),
        zip: transform('format_from_zip'),
      },
      to: {
        base64: transform('format_to_base64', obj),
        b64: self.base64,
        gzip: transform('format_to_gzip'),
        gz: self.gzip,
      },
    },
    fmt: $.transform.format,

    hash: {
      md5: transform('hash_md5', obj),
      sha256: transform('hash_sha256', obj),
    },

    meta: {
      err: transform('meta_err', { transforms: null, error_messages: ['.*'] }),
      for_each: transform('meta_for_each', { object: $.config.object, transforms: null }),
      kv_store: {
        lock: transform('meta_kv_store_lock', {
          object: $.config.object { ttl_key: null },
          kv_store: null,
          prefix: null,
          ttl_offset: null,
          transforms: null,
        }),
      },
      metric: {
        duration: transform('meta_metric_duration', { metric: $.config.metric, transforms: null }),
      },
      retry: transform('meta_retry', {
        transforms: null,
        condition: null,
        retry: $.config.retry,
        error_messages: ['.*'],
      }),
      switch: transform('meta_switch', { cases: null }),
    },

    network: {
      domain: {
        registered_domain: transform('network_domain_registered_domain', obj),
        subdomain: transform('network_domain_subdomain', obj),
        top_level_domain: transform('network_domain_top_level_domain', obj),
        tld: self.top_level_domain,
      },
    },
    net: $.transform.network,

    number: {
      local d = { object: $.config.object, value: null },
      maximum: transform('number_maximum', d),
      max: self.maximum,
      minimum: transform('number_minimum', d),
      min: self.minimum,
      math: {
        addition: transform('number_math_addition', obj),
        add: self.addition,
        subtraction: transform('number_math_subtraction', obj),
        sub: self.subtraction,
        multiplication: transform('number_math_multiplication', obj),
        mul: self.multiplication,
        division: transform('number_math_division', obj),
        div: self.division,
      },
    },
    num: $.transform.number,

    object: {
      copy: transform('object_copy', obj),
      cp: self.copy,
      delete: transform('object_delete', obj),
      del: self.delete,
      insert: transform('object_insert', { object: $.config.object, value: null }),
      jq: transform('object_jq', { filter: null }),
      to: {
        boolean: transform('object_to_boolean', obj),
        bool: self.boolean,
        float: transform('object_to_float', obj),
        integer: transform('object_to_integer', obj),
        int: self.integer,
        string: transform('object_to_string', obj),
        str: self.string,
        unsigned_integer: transform('object_to_unsigned_integer', obj),
        uint: self.unsigned_integer,
      },
    },
    obj: $.transform.object,

    send: {
      aws: {
        data_firehose: transform('send_aws_data_firehose', send_aws_defaults),
        firehose: self.data_firehose,
        dynamodb: {
          put: transform('send_aws_dynamodb_put', send_aws_defaults),
        },
        eventbridge: transform('send_aws_eventbridge', send_aws_defaults { description: null }),
        kinesis_data_stream: transform('send_aws_kinesis_data_stream', send_aws_defaults {
          use_batch_key_as_partition_key: false,
          enable_record_aggregation: false,
        }),
        lambda: transform_unpruned('send_aws_lambda', {
          batch: $.config.batch,
          aws: $.config.aws,
          auxiliary_transforms: null,
        }),
        s3: transform('send_aws_s3', send_aws_defaults {
          file_path: $.file_path,
          storage_class: 'STANDARD',
          checksum_algorithm: null,
          use_batch_key_as_prefix: null,
        }),
        sns: transform('send_aws_sns', send_aws_defaults),
        sqs: transform('send_aws_sqs', send_aws_defaults),
      },
      file: transform('send_file', send_defaults {
        file_path: $.file_path,
        use_batch_key_as_prefix: null,
      }),
      gcp: {
        storage: transform('send_gcp_storage', send_defaults {
          gcp: $.config.gcp,
          use_batch_key_as_prefix: null,
        }),
      },
      http: {
        post: transform('send_http_post', send_defaults { url: null, headers: null }),
      },
      stdout: transform('send_stdout', send_defaults),
    },

    string: {
      append: transform('string_append', {
        object: $.config.object,
        suffix: null,
        suffix_key: null,
      }),
      capture: transform('string_capture', { object: $.config.object, pattern: null, count: 0 }),
      replace: transform('string_replace', {
        object: $.config.object,
        pattern: null,
        replacement: null,
      }),
      repl: self.replace,
      split: transform('string_split', { object: $.config.object, separator: null }),
      to: {
        lower: transform('string_to_lower', obj),
        upper: transform('string_to_upper', obj),
        snake: transform('string_to_snake', obj),
      },
      uuid: transform('string_uuid', obj),
    },
    str: $.transform.string,

    test: {
      message: transform('test_message', { value: null }),
    },

    time: {
      local fmt = { object: $.config.object, format: null, location: 'UTC' },
      from: {
        string: transform('time_from_string', fmt),
        str: self.string,
        unix: transform('time_from_unix', obj),
        unix_milli: transform('time_from_unix_milli', obj),
      },
      now: transform('time_now', obj),
      to: {
        string: transform('time_to_string', fmt),
        str: self.string,
        unix: transform('time_to_unix', obj),
        unix_milli: transform('time_to_unix_milli', obj),
      },
      unix: self.to.unix,
      unix_milli: self.to.unix_milli,
    },

    utility: {
      control: transform('utility_control', { batch: $.config.batch }),
      delay: transform('utility_delay', { duration: null }),
      drop: transform('utility_drop'),
      err: transform('utility_err', { message: null }),
      metric: {
        bytes: transform('utility_metric_bytes', { metric: $.config.metric }),
        count: transform('utility_metric_count', { metric: $.config.metric }),
        freshness: transform('utility_metric_freshness', {
          object: $.config.object,
          metric: $.config.metric,
          threshold: null,
        }),
      },
      secret: transform('utility_secret', { secret: null }),
    },
    util: $.transform.utility,
  },
  tf: $.transform,

  kv_store: {
    aws: {
      dynamodb: plain('aws_dynamodb', {
        aws: $.config.aws,
        attributes: { partition_key: null, sort_key: null, value: null, ttl: null },
        consistent_read: false,
      }),
    },
    csv_file: plain('csv_file', { file: null, column: null, delimiter: ',', header: null }),
    json_file: plain('json_file', { file: null, is_lines: false }),
    memory: plain('memory', { capacity: 1024 }),
    mmdb: plain('mmdb', { file: null }),
    // sluice's embedded lock store: an SQLite file, shared by the processes of one machine.
    sqlite: plain('sqlite', { file: null }),
    text_file: plain('text_file', { file: null }),
  },

  secrets: {
    aws: {
      secrets_manager: plain('aws_secrets_manager', {
        id: null,
        aws: $.config.aws,
        ttl_offset: null,
      }),
    },
    environment_variable: plain('environment_variable', {
      id: null,
      name: null,
      ttl_offset: null,
    }),
  },
}

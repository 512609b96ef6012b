#!/usr/bin/env bash
# Local AWS and Google Cloud Storage emulators for sluice's integration tests, installed
# into .emulators/ (ignored by git) at pinned versions, from the package registries only.
#
#   scripts/emulators.sh install          install every emulator (idempotent; fast when done)
#   scripts/emulators.sh path dynamodb    print the DynamoDB emulator's binary
#   scripts/emulators.sh path moto        print moto's server binary
#   scripts/emulators.sh path kinesalite  print kinesalite's binary (Kinesis resharding)
#   scripts/emulators.sh path gcs         print the Cloud Storage emulator's binary
#   scripts/emulators.sh start dynamodb [PORT]
#                                         run it in the foreground on 127.0.0.1:PORT
#                                         (default 8000), in memory, with the tables of
#                                         tests/fixtures/dynamodb_tables.json (the examples'
#                                         sluice-locks); Ctrl-C stops it
#   scripts/emulators.sh start moto [PORT]
#                                         run moto in the foreground on 127.0.0.1:PORT
#                                         (default 5000), in memory, with the streams,
#                                         delivery streams and buckets of
#                                         tests/fixtures/moto_resources.json (the examples');
#                                         prints "moto ready" once they exist; Ctrl-C stops it
#   scripts/emulators.sh start gcs [PORT]
#                                         run the Cloud Storage emulator in the foreground on
#                                         127.0.0.1:PORT (default 9023), in memory, with the
#                                         examples' bucket sluice-example; prints "gcs ready"
#                                         once it exists; Ctrl-C stops it
#
# DynamoDB: dynoxide (a DynamoDB-compatible server backed by SQLite; a static binary in the
# npm package @dynoxide/linux-x64). It implements what the lock store needs: conditional
# PutItem with ReturnValuesOnConditionCheckFailure=ALL_OLD, TransactWriteItems with
# CancellationReasons (and the old item), UpdateTimeToLive.
#
# Kinesis, Firehose (and the S3 bucket Firehose delivers to), SQS, SNS, EventBridge and S3
# (send_aws_s3, configs at s3:// URLs): moto's server (PyPI `moto[server]`), in a
# virtualenv at .emulators/venv. Quirks (reference/toolchain.md): a
# Firehose delivery stream must be created with CompressionFormat set (the Rust SDK cannot
# read moto's description otherwise), and its destination bucket must exist before the
# first PutRecordBatch (moto answers HTTP 500 otherwise).
#
# Google Cloud Storage (send_gcp_storage): gcp-storage-emulator (PyPI), in moto's
# virtualenv. It serves the JSON API (/storage/v1, media and resumable uploads under
# /upload/storage/v1) and checks no credentials. Quirks: it answers one request at a time
# (HTTP/1.0, no threads); it does not page object lists; a missing bucket or object is a
# 404 with an empty body; a media upload (uploadType=media) with an empty body, or whose
# Content-Type is application/json or multipart/*, fails with no answer (the connection
# closes): its body is parsed rather than stored (multipart and resumable uploads are fine).
#
# The tests do not need `start`: tests/common/dynamodb.rs, tests/common/moto.rs and
# tests/common/gcs.rs spawn the installed binaries on free loopback ports (or use
# SLUICE_TEST_DYNAMODB_ENDPOINT / SLUICE_TEST_MOTO_ENDPOINT / SLUICE_TEST_GCS_ENDPOINT when
# set). To point sluice itself at running emulators:
#   AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 \
#   AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 \
#   AWS_ENDPOINT_URL_KINESIS=http://127.0.0.1:5000 \
#   AWS_ENDPOINT_URL_FIREHOSE=http://127.0.0.1:5000 sluice run ...
#
# Needs: npm (node 18 or later) and python3 (3.9 or later, with the venv module).
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=.emulators
DYNOXIDE_VERSION=1.2.1
DYNOXIDE_PKG="@dynoxide/linux-x64"
DYNOXIDE_BIN="$DIR/node_modules/$DYNOXIDE_PKG/dynoxide"
MOTO_VERSION=5.2.5
MOTO_VENV="$DIR/venv"
MOTO_BIN="$MOTO_VENV/bin/moto_server"

die() { echo "emulators.sh: $*" >&2; exit 1; }

installed_version() { # package.json of an installed npm package -> its version
    sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$1" 2>/dev/null | head -n1
}

install_dynoxide() {
    local pkg_json="$DIR/node_modules/$DYNOXIDE_PKG/package.json"
    if [[ -x "$DYNOXIDE_BIN" && "$(installed_version "$pkg_json")" == "$DYNOXIDE_VERSION" ]]; then
        echo "dynoxide $DYNOXIDE_VERSION: already installed ($DYNOXIDE_BIN)"
        return
    fi
    case "$(uname -s)-$(uname -m)" in
        Linux-x86_64) ;;
        *) die "dynoxide is installed from $DYNOXIDE_PKG, which is for Linux x86_64 only" ;;
    esac
    command -v npm >/dev/null || die "npm is needed to install dynoxide (apt-get install nodejs npm)"
    mkdir -p "$DIR"
    echo "installing dynoxide $DYNOXIDE_VERSION into $DIR/"
    npm install --no-save --no-audit --no-fund --loglevel=error \
        --prefix "$DIR" "$DYNOXIDE_PKG@$DYNOXIDE_VERSION" >&2
    [[ -x "$DYNOXIDE_BIN" ]] || die "npm finished but $DYNOXIDE_BIN is missing"
    "$DYNOXIDE_BIN" --version
}

# pip_install NAME REQUIREMENT VERSION BIN STAMP: installs REQUIREMENT (pinned at VERSION)
# into moto's virtualenv, made first if missing, unless BIN is there and STAMP says VERSION.
pip_install() {
    local name=$1 requirement=$2 version=$3 bin=$4 stamp=$5
    if [[ -x "$bin" && "$(cat "$stamp" 2>/dev/null)" == "$version" ]]; then
        echo "$name $version: already installed ($bin)"
        return
    fi
    command -v python3 >/dev/null || die "python3 is needed to install $name (apt-get install python3 python3-venv)"
    mkdir -p "$DIR"
    echo "installing $requirement into $MOTO_VENV/"
    [[ -x "$MOTO_VENV/bin/pip" ]] || python3 -m venv "$MOTO_VENV" \
        || die "python3 -m venv failed (apt-get install python3-venv)"
    "$MOTO_VENV/bin/pip" install --quiet --disable-pip-version-check "$requirement" >&2
    [[ -x "$bin" ]] || die "pip finished but $bin is missing"
    echo "$version" >"$stamp"
    echo "$name $version installed"
}

install_moto() {
    pip_install moto "moto[server]==$MOTO_VERSION" "$MOTO_VERSION" "$MOTO_BIN" \
        "$MOTO_VENV/.moto-version"
}

# moto has no schema file like dynoxide's: start it, create the fixture's resources with
# boto3 (installed with moto), say so, and stay in the foreground until moto exits or this
# script is stopped (which stops moto).
start_moto() {
    local port=$1 endpoint="http://127.0.0.1:$1"
    "$MOTO_BIN" -H 127.0.0.1 -p "$port" >/dev/null 2>&1 &
    local moto=$!
    trap 'kill "$moto" 2>/dev/null; exit 0' INT TERM
    trap 'kill "$moto" 2>/dev/null' EXIT
    local up=
    for _ in $(seq 300); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then up=1; break; fi
        kill -0 "$moto" 2>/dev/null || die "moto exited at start (is port $port free?)"
        sleep 0.1
    done
    [[ -n "$up" ]] || die "moto did not listen on $endpoint within 30 s"
    "$MOTO_VENV/bin/python" - "$endpoint" tests/fixtures/moto_resources.json <<'PY' \
        || die "creating the resources of tests/fixtures/moto_resources.json failed"
import json, sys, time
import boto3

endpoint, fixture = sys.argv[1], sys.argv[2]
spec = json.load(open(fixture))
kw = dict(endpoint_url=endpoint, region_name="us-east-1",
          aws_access_key_id="test", aws_secret_access_key="test")
s3, kinesis, firehose = (boto3.client(s, **kw) for s in ("s3", "kinesis", "firehose"))
for bucket in spec.get("s3_buckets", []):
    s3.create_bucket(Bucket=bucket)
for stream in spec.get("kinesis_streams", []):
    kinesis.create_stream(StreamName=stream["name"], ShardCount=stream["shards"])
    for _ in range(100):
        d = kinesis.describe_stream_summary(StreamName=stream["name"])
        if d["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE":
            break
        time.sleep(0.1)
    else:
        sys.exit(f"stream {stream['name']} did not become active")
for ds in spec.get("firehose_delivery_streams", []):
    # The bucket must exist first (moto answers PutRecordBatch with HTTP 500 otherwise);
    # CompressionFormat must be set (the Rust SDK cannot read the description otherwise).
    firehose.create_delivery_stream(
        DeliveryStreamName=ds["name"],
        DeliveryStreamType="DirectPut",
        ExtendedS3DestinationConfiguration={
            "RoleARN": "arn:aws:iam::123456789012:role/firehose",
            "BucketARN": "arn:aws:s3:::" + ds["bucket"],
            "CompressionFormat": "UNCOMPRESSED",
        },
    )
PY
    echo "moto ready on $endpoint"
    wait "$moto"
}

# Google Cloud Storage: gcp-storage-emulator, in moto's virtualenv (its own version stamp).
GCS_VERSION=2026.7.19
GCS_BIN="$MOTO_VENV/bin/gcp-storage-emulator"
GCS_BUCKETS=(sluice-example)

install_gcs() {
    pip_install gcp-storage-emulator "gcp-storage-emulator==$GCS_VERSION" "$GCS_VERSION" \
        "$GCS_BIN" "$MOTO_VENV/.gcs-version"
}

# As start_moto: start it in memory, create the examples' buckets with the JSON API (a POST
# to /storage/v1/b), say so, and stay in the foreground until it exits or this script is
# stopped (which stops it).
start_gcs() {
    local port=$1 endpoint="http://127.0.0.1:$1"
    "$GCS_BIN" start --host 127.0.0.1 --port "$port" --in-memory >/dev/null 2>&1 &
    local gcs=$!
    trap 'kill "$gcs" 2>/dev/null; exit 0' INT TERM
    trap 'kill "$gcs" 2>/dev/null' EXIT
    local up=
    for _ in $(seq 300); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then up=1; break; fi
        kill -0 "$gcs" 2>/dev/null || die "gcp-storage-emulator exited at start (is port $port free?)"
        sleep 0.1
    done
    [[ -n "$up" ]] || die "gcp-storage-emulator did not listen on $endpoint within 30 s"
    "$MOTO_VENV/bin/python" - "$endpoint" "${GCS_BUCKETS[@]}" <<'PY' \
        || die "creating the buckets ${GCS_BUCKETS[*]} failed"
import json, sys, urllib.request

endpoint, buckets = sys.argv[1], sys.argv[2:]
for bucket in buckets:
    req = urllib.request.Request(
        endpoint + "/storage/v1/b?project=test",
        data=json.dumps({"name": bucket}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    urllib.request.urlopen(req).read()
PY
    echo "gcs ready on $endpoint"
    wait "$gcs"
}

# The Lambda tools, in moto's virtualenv: cargo-lambda (its runtime API emulator for
# tests/lambda_e2e.rs, and `cargo lambda build`), the KPL encoder aws-kinesis-agg (the
# Kinesis fixture of tests/lambda_handlers.rs) and cfn-lint (examples/lambda/template.yaml).
CARGO_LAMBDA_VERSION=1.9.2
KINESIS_AGG_VERSION=1.2.3
CFN_LINT_VERSION=1.58.0

install_lambda_tools() {
    local stamp="$MOTO_VENV/.lambda-tools-version"
    local want="$CARGO_LAMBDA_VERSION $KINESIS_AGG_VERSION $CFN_LINT_VERSION"
    if [[ -x "$MOTO_VENV/bin/cargo-lambda" && "$(cat "$stamp" 2>/dev/null)" == "$want" ]]; then
        echo "lambda tools ($want): already installed"
        return
    fi
    echo "installing cargo-lambda, aws-kinesis-agg and cfn-lint into $MOTO_VENV/"
    "$MOTO_VENV/bin/pip" install --quiet --disable-pip-version-check \
        "cargo-lambda==$CARGO_LAMBDA_VERSION" "aws-kinesis-agg==$KINESIS_AGG_VERSION" \
        "cfn-lint==$CFN_LINT_VERSION" >&2
    [[ -x "$MOTO_VENV/bin/cargo-lambda" ]] || die "pip finished but cargo-lambda is missing"
    echo "$want" >"$stamp"
}

# Kinesis resharding, which moto does not model (after a split it keeps putting records
# into the closed parent, and never ends the parent's iterator): kinesalite (npm), which
# closes the parent, routes new records to the children and ends the parent's iterator as
# Kinesis does. tests/cli_tap.rs reads a split stream through it. In a prefix of its own:
# `npm install --no-save` prunes what else a prefix holds.
KINESALITE_VERSION=3.3.3
KINESALITE_DIR="$DIR/kinesalite"
KINESALITE_BIN="$KINESALITE_DIR/node_modules/.bin/kinesalite"

install_kinesalite() {
    local pkg_json="$KINESALITE_DIR/node_modules/kinesalite/package.json"
    if [[ -x "$KINESALITE_BIN" && "$(installed_version "$pkg_json")" == "$KINESALITE_VERSION" ]]; then
        echo "kinesalite $KINESALITE_VERSION: already installed ($KINESALITE_BIN)"
        return
    fi
    command -v npm >/dev/null || die "npm is needed to install kinesalite (apt-get install nodejs npm)"
    mkdir -p "$KINESALITE_DIR"
    echo "installing kinesalite $KINESALITE_VERSION into $KINESALITE_DIR/"
    npm install --no-save --no-audit --no-fund --loglevel=error \
        --prefix "$KINESALITE_DIR" "kinesalite@$KINESALITE_VERSION" >&2
    [[ -x "$KINESALITE_BIN" ]] || die "npm finished but $KINESALITE_BIN is missing"
}

# The browser test of `sluice play` (tests/cli_play.rs, tests/play/browser.mjs) drives
# Debian's chromium (scripts/test.sh installs it) with playwright-core: the driver alone,
# no browser download. In a prefix of its own, as kinesalite is.
PLAYWRIGHT_VERSION=1.65.1
PLAYWRIGHT_DIR="$DIR/playwright"

install_playwright() {
    local pkg_json="$PLAYWRIGHT_DIR/node_modules/playwright-core/package.json"
    if [[ "$(installed_version "$pkg_json")" == "$PLAYWRIGHT_VERSION" ]]; then
        echo "playwright-core $PLAYWRIGHT_VERSION: already installed ($PLAYWRIGHT_DIR)"
        return
    fi
    command -v npm >/dev/null || die "npm is needed to install playwright-core (apt-get install nodejs npm)"
    mkdir -p "$PLAYWRIGHT_DIR"
    echo "installing playwright-core $PLAYWRIGHT_VERSION into $PLAYWRIGHT_DIR/"
    npm install --no-save --no-audit --no-fund --loglevel=error \
        --prefix "$PLAYWRIGHT_DIR" "playwright-core@$PLAYWRIGHT_VERSION" >&2
    [[ -f "$pkg_json" ]] || die "npm finished but $pkg_json is missing"
}

cmd="${1:-}"
case "$cmd" in
    install)
        install_dynoxide
        install_moto
        install_gcs
        install_lambda_tools
        install_kinesalite
        install_playwright
        ;;
    path)
        case "${2:-}" in
            dynamodb) echo "$PWD/$DYNOXIDE_BIN" ;;
            moto) echo "$PWD/$MOTO_BIN" ;;
            kinesalite) echo "$PWD/$KINESALITE_BIN" ;;
            gcs) echo "$PWD/$GCS_BIN" ;;
            *) die "usage: $0 path dynamodb|moto|kinesalite|gcs" ;;
        esac
        ;;
    start)
        case "${2:-}" in
            dynamodb)
                [[ -x "$DYNOXIDE_BIN" ]] || die "dynoxide is not installed: run $0 install"
                exec "$DYNOXIDE_BIN" --host 127.0.0.1 --port "${3:-8000}" \
                    --schema tests/fixtures/dynamodb_tables.json
                ;;
            moto)
                [[ -x "$MOTO_BIN" ]] || die "moto is not installed: run $0 install"
                start_moto "${3:-5000}"
                ;;
            gcs)
                [[ -x "$GCS_BIN" ]] || die "gcp-storage-emulator is not installed: run $0 install"
                start_gcs "${3:-9023}"
                ;;
            *) die "usage: $0 start dynamodb|moto|gcs [PORT]" ;;
        esac
        ;;
    *)
        # The header's usage: up to its second blank comment line.
        awk 'NR > 1 { if ($0 == "#" && ++blank == 2) exit; print }' "$0" \
            | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac

#!/usr/bin/env bash
# Local AWS emulators for sluice's integration tests, installed into .emulators/ (ignored
# by git) at pinned versions, from the package registries only.
#
#   scripts/emulators.sh install          install every emulator (idempotent; fast when done)
#   scripts/emulators.sh path dynamodb    print the DynamoDB emulator's binary
#   scripts/emulators.sh start dynamodb [PORT]
#                                         run it in the foreground on 127.0.0.1:PORT
#                                         (default 8000), in memory, with the tables of
#                                         tests/fixtures/dynamodb_tables.json (the examples'
#                                         sluice-locks); Ctrl-C stops it
#
# DynamoDB: dynoxide (a DynamoDB-compatible server backed by SQLite; a static binary in the
# npm package @dynoxide/linux-x64). It implements what the lock store needs: conditional
# PutItem with ReturnValuesOnConditionCheckFailure=ALL_OLD, TransactWriteItems with
# CancellationReasons (and the old item), UpdateTimeToLive.
#
# The tests do not need `start`: tests/common/dynamodb.rs spawns the installed binary on a
# free loopback port (or uses SLUICE_TEST_DYNAMODB_ENDPOINT when set). To point sluice
# itself at a running emulator:
#   AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 \
#   AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 sluice run ...
#
# Needs: npm (node 18 or later). Later: moto for Kinesis and Firehose.
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=.emulators
DYNOXIDE_VERSION=1.2.1
DYNOXIDE_PKG="@dynoxide/linux-x64"
DYNOXIDE_BIN="$DIR/node_modules/$DYNOXIDE_PKG/dynoxide"

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

cmd="${1:-}"
case "$cmd" in
    install)
        install_dynoxide
        ;;
    path)
        case "${2:-}" in
            dynamodb) echo "$PWD/$DYNOXIDE_BIN" ;;
            *) die "usage: $0 path dynamodb" ;;
        esac
        ;;
    start)
        case "${2:-}" in
            dynamodb)
                [[ -x "$DYNOXIDE_BIN" ]] || die "dynoxide is not installed: run $0 install"
                exec "$DYNOXIDE_BIN" --host 127.0.0.1 --port "${3:-8000}" \
                    --schema tests/fixtures/dynamodb_tables.json
                ;;
            *) die "usage: $0 start dynamodb [PORT]" ;;
        esac
        ;;
    *)
        sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac

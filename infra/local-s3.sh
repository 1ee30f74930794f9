#!/usr/bin/env bash
# Start an S3-protocol server (moto) on loopback for trying the S3 path on one machine.
#   infra/local-s3.sh [PORT] [BUCKET]      then, in another shell:
#   export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=us-east-1
#   sakura build --spec examples/templates.yaml --model tiny-flux --store "s3://BUCKET/lib?endpoint=http://127.0.0.1:PORT"
set -euo pipefail
PORT="${1:-5000}"
BUCKET="${2:-sakura-library}"
VENV="$(dirname "$0")/../.venv/bin"
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=us-east-1
"$VENV/moto_server" -H 127.0.0.1 -p "$PORT" &
SERVER=$!
trap 'kill $SERVER' EXIT INT TERM
for _ in $(seq 50); do
  "$VENV/python" -c "import boto3; boto3.client('s3', endpoint_url='http://127.0.0.1:$PORT').create_bucket(Bucket='$BUCKET')" 2>/dev/null && break
  sleep 0.2
done
echo "S3 server on http://127.0.0.1:$PORT with bucket $BUCKET (Ctrl-C stops it)"
wait $SERVER

#!/usr/bin/env bash
# Start a shared MLflow tracking server for Veil. Safe by default: binds to 127.0.0.1.
# Expose it deliberately (behind a proxy with auth) with MLFLOW_HOST=0.0.0.0.
#   mlflow/start-server.sh                  # sqlite store + artifacts under ./mlflow-server/
#   MLFLOW_PORT=5001 mlflow/start-server.sh
#   MLFLOW_HOST=10.0.0.5 MLFLOW_ALLOWED_HOSTS=head.internal mlflow/start-server.sh   # workers call it by name
# Then point Veil at it: veil run ... --tracking-uri http://127.0.0.1:5000  (or export MLFLOW_TRACKING_URI)
# MLflow 3 answers API calls only when the request's Host header is allowed (default: localhost and private
# addresses): the server admits its own address and localhost, plus every name in MLFLOW_ALLOWED_HOSTS
# (comma-separated: the names or addresses clients reach it by). Veil checks this with one real call at start.
set -euo pipefail
HOST="${MLFLOW_HOST:-127.0.0.1}"
PORT="${MLFLOW_PORT:-5000}"
ROOT="${MLFLOW_ROOT:-$PWD/mlflow-server}"
BACKEND="${MLFLOW_BACKEND_URI:-sqlite:///$ROOT/mlflow.db}"
ARTIFACTS="${MLFLOW_ARTIFACT_ROOT:-$ROOT/artifacts}"
WORKERS="${MLFLOW_WORKERS:-2}"
ALLOWED="localhost:*,127.0.0.1:*"
if [ "$HOST" != "0.0.0.0" ] && [ "$HOST" != "::" ]; then ALLOWED="$ALLOWED,$HOST:$PORT,$HOST"; fi
IFS=',' read -ra EXTRA <<< "${MLFLOW_ALLOWED_HOSTS:-}"
for name in "${EXTRA[@]}"; do
  name="$(echo "$name" | tr -d '[:space:]')"
  [ -n "$name" ] && ALLOWED="$ALLOWED,$name,$name:$PORT"
done
# bound to every address with no names given: MLflow's own default (localhost and private addresses)
HOSTS_FLAG=(--allowed-hosts "$ALLOWED")
if { [ "$HOST" = "0.0.0.0" ] || [ "$HOST" = "::" ]; } && [ -z "${MLFLOW_ALLOWED_HOSTS:-}" ]; then HOSTS_FLAG=(); fi
# Veil runs no MLflow server jobs (GenAI evaluation, trace rollups): without this the server starts a job runner
# and seven huey worker pools beside itself. Set it to true to use them.
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION="${MLFLOW_SERVER_ENABLE_JOB_EXECUTION:-false}"
mkdir -p "$ROOT" "$ARTIFACTS"
MLFLOW_BIN="${MLFLOW_BIN:-$(command -v mlflow || echo "$(dirname "$0")/../.venv/bin/mlflow")}"
echo "MLflow server: backend $BACKEND, artifacts $ARTIFACTS, http://$HOST:$PORT" >&2
# Artifacts go through the server (--serve-artifacts, runs' artifact root mlflow-artifacts:/): a client on any
# node uploads to the server, never to a path that would exist only on that node.
exec "$MLFLOW_BIN" server --backend-store-uri "$BACKEND" --serve-artifacts --artifacts-destination "$ARTIFACTS" \
  --host "$HOST" --port "$PORT" --workers "$WORKERS" "${HOSTS_FLAG[@]}"

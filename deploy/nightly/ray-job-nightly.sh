#!/usr/bin/env bash
# Submit the nightly to a running Ray cluster as a Ray job (the Jobs API), e.g. from cron on the head node:
#   30 2 * * * /srv/veil/deploy/nightly/ray-job-nightly.sh
# RAY_ADDRESS: the cluster's dashboard (default: the head's own, http://127.0.0.1:8265; from a laptop, after
# `ray dashboard cluster.yaml`). MLFLOW_TRACKING_URI: the tracking server as the cluster's nodes reach it.
# The job runs on the head, joins the cluster (--address auto) and exits 1 on a regression; so does this script.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec ray job submit \
  --address "${RAY_ADDRESS:-http://127.0.0.1:8265}" \
  --working-dir . \
  --submission-id "veil-nightly-$(date +%Y%m%d-%H%M%S)" \
  -- veil nightly --address auto \
     --tracking-uri "${MLFLOW_TRACKING_URI:-http://127.0.0.1:5000}"
